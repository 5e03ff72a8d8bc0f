//! The memory the profilers may hold at once, process-wide: each profile reserves the most it
//! can take before it starts and gives the reservation back when it is done. The executable's
//! symbol tables, which every profile reads to name its frames, are reserved once, by the first
//! profile running, and dropped when the last one is done. A profile whose reservation does not
//! fit beside the running ones is refused, and so is a second profile of a kind already running
//! (the CPU sampler and the allocator's profiler are one per process).

use parking_lot::Mutex;

/// What the CPU and heap profiles running at once may hold together, symbol tables included:
/// under an eighth of the shipped Deployment's 256 MiB limit.
pub const PROFILING_MEMORY_BOUND: usize = 30 << 20;

/// What reading the executable's symbol tables takes while a profile names its frames (their
/// pages mapped, and the sorted symbol list `backtrace` builds), measured at 17.8 MB on the
/// stock binary without debug info (docs/benchmarks.md §6); shared by the running profiles.
pub const SYMBOL_TABLE_BYTES: usize = 18 << 20;

/// A kind of profile; one of each may run at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Cpu,
    Heap,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Cpu => "CPU",
            Kind::Heap => "heap",
        }
    }
}

/// Why a profile may not start now.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// One of this kind is running.
    #[error("a {} profile is already being taken; retry when it is done", .0.name())]
    Busy(Kind),
    /// It would take the profilers past [`PROFILING_MEMORY_BOUND`].
    #[error(
        "a {} profile takes up to {} MB and the profiles running hold up to {} MB of the {} MB profiling may use; retry when they are done",
        kind.name(), mb(*needs), mb(*held), mb(*bound)
    )]
    OverBound {
        /// The kind asked for.
        kind: Kind,
        /// Its reservation.
        needs: usize,
        /// What the running profiles reserved.
        held: usize,
        /// The bound.
        bound: usize,
    },
}

fn mb(bytes: usize) -> String {
    format!("{:.1}", bytes as f64 / f64::from(1 << 20))
}

/// The reservations of the running profiles.
#[derive(Debug)]
pub(crate) struct Budget {
    running: Mutex<Vec<(Kind, usize)>>,
    /// Reserved once while any profile runs: the symbol tables they share.
    shared: usize,
    bound: usize,
}

/// The process's budget.
pub(crate) static BUDGET: Budget = Budget::new(SYMBOL_TABLE_BYTES, PROFILING_MEMORY_BOUND);

impl Budget {
    /// A budget of `bound` bytes where the running profiles share `shared` of them.
    pub(crate) const fn new(shared: usize, bound: usize) -> Self {
        Budget {
            running: Mutex::new(Vec::new()),
            shared,
            bound,
        }
    }

    /// Reserves `bytes` for a profile of `kind` (and the shared bytes, when it is the first),
    /// held until the returned value is dropped.
    pub(crate) fn reserve(&self, kind: Kind, bytes: usize) -> Result<Reservation<'_>, Refusal> {
        let mut running = self.running.lock();
        if running.iter().any(|(k, _)| *k == kind) {
            return Err(Refusal::Busy(kind));
        }
        let (held, needs) = match running.is_empty() {
            true => (0, bytes.saturating_add(self.shared)),
            false => (
                running.iter().map(|(_, b)| b).sum::<usize>() + self.shared,
                bytes,
            ),
        };
        if held.saturating_add(needs) > self.bound {
            return Err(Refusal::OverBound {
                kind,
                needs,
                held,
                bound: self.bound,
            });
        }
        running.push((kind, bytes));
        Ok(Reservation { budget: self, kind })
    }
}

/// A running profile's reservation. Dropping it ends the profile: the symbol tables profiles
/// read are dropped (`backtrace`'s cache, which the CPU encoder and jemalloc_pprof both fill),
/// then the bytes are given back. Profiles move it onto the thread that makes them, so it is
/// held until that work is done even when the request went away first.
#[derive(Debug)]
pub(crate) struct Reservation<'a> {
    budget: &'a Budget,
    kind: Kind,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut running = self.budget.running.lock();
        running.retain(|(k, _)| *k != self.kind);
        let last = running.is_empty();
        drop(running);
        if last {
            backtrace::clear_symbol_cache();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_of_each_kind_within_the_bound_sharing_the_symbol_tables() {
        let budget = Budget::new(5, 30);
        let cpu = budget.reserve(Kind::Cpu, 10).unwrap();
        assert_eq!(
            budget.reserve(Kind::Cpu, 1).unwrap_err(),
            Refusal::Busy(Kind::Cpu)
        );
        let refused = budget.reserve(Kind::Heap, 16).unwrap_err();
        assert_eq!(
            refused,
            Refusal::OverBound {
                kind: Kind::Heap,
                needs: 16,
                held: 15,
                bound: 30
            }
        );
        let heap = budget.reserve(Kind::Heap, 15).unwrap();
        drop(cpu);
        assert!(budget.reserve(Kind::Cpu, 10).is_ok(), "given back");
        drop(heap);
        assert_eq!(
            budget.reserve(Kind::Heap, 26).unwrap_err(),
            Refusal::OverBound {
                kind: Kind::Heap,
                needs: 31,
                held: 0,
                bound: 30
            },
            "the first pays for the shared bytes, and never fits alone"
        );
        assert!(budget.reserve(Kind::Heap, 25).is_ok());
    }
}
