//! The memory the profilers may hold at once, process-wide: each profile reserves the most it
//! can take before it starts and gives the reservation back when it is done, after dropping the
//! symbol tables it read. A profile whose
//! reservation does not fit beside the running ones is refused, and so is a second profile of a
//! kind already running (the CPU sampler and the allocator's profiler are one per process).

use parking_lot::Mutex;

/// What the CPU and heap profiles running at once may hold together: a tenth of the shipped
/// Deployment's 256 MiB limit, and more than either needs.
pub const PROFILING_MEMORY_BOUND: usize = 30 << 20;

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
#[derive(Debug, Default)]
pub(crate) struct Budget {
    running: Mutex<Vec<(Kind, usize)>>,
}

/// The process's budget.
pub(crate) static BUDGET: Budget = Budget {
    running: Mutex::new(Vec::new()),
};

impl Budget {
    /// Reserves `bytes` for a profile of `kind` within `bound`, held until the returned value is
    /// dropped.
    pub(crate) fn reserve(
        &self,
        kind: Kind,
        bytes: usize,
        bound: usize,
    ) -> Result<Reservation<'_>, Refusal> {
        let mut running = self.running.lock();
        if running.iter().any(|(k, _)| *k == kind) {
            return Err(Refusal::Busy(kind));
        }
        let held: usize = running.iter().map(|(_, b)| b).sum();
        if held.saturating_add(bytes) > bound {
            return Err(Refusal::OverBound {
                kind,
                needs: bytes,
                held,
                bound,
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
        backtrace::clear_symbol_cache();
        self.budget.running.lock().retain(|(k, _)| *k != self.kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_of_each_kind_within_the_bound() {
        let budget = Budget::default();
        let cpu = budget.reserve(Kind::Cpu, 10, 30).unwrap();
        assert_eq!(
            budget.reserve(Kind::Cpu, 1, 30).unwrap_err(),
            Refusal::Busy(Kind::Cpu)
        );
        let refused = budget.reserve(Kind::Heap, 21, 30).unwrap_err();
        assert_eq!(
            refused,
            Refusal::OverBound {
                kind: Kind::Heap,
                needs: 21,
                held: 10,
                bound: 30
            }
        );
        let heap = budget.reserve(Kind::Heap, 20, 30).unwrap();
        drop(cpu);
        assert!(budget.reserve(Kind::Cpu, 10, 30).is_ok(), "given back");
        drop(heap);
        assert!(
            budget.reserve(Kind::Heap, 31, 30).is_err(),
            "never fits alone"
        );
    }
}
