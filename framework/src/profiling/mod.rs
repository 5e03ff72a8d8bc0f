//! The process's profilers, for `/debug/pprof` (`--profiling`): the CPU sampler and the heap
//! profiler hook a binary plugs in for its allocator, both within [`PROFILING_MEMORY_BOUND`].
//!
//! A profile reserves the most it can hold before it starts ([`CPU_PROFILE_BYTES`], or its heap
//! profiler's [`HeapProfiler::memory_bound`]), and the first one running also reserves the
//! symbol tables all of them read ([`SYMBOL_TABLE_BYTES`]). One that does not fit beside the
//! running ones is refused ([`ProfileError::OverBound`]), and so is a second of a kind already
//! running ([`ProfileError::Busy`]). When a profile is done, what it held is given back: its
//! buffers are freed, and when no other profile runs the symbol tables are dropped (the
//! allocator then returns the pages to the system as it decays free memory: jemalloc within
//! about 10 s).
//!
//! - `cpu`: the CPU sampler and its encoding as Go's `runtime/pprof` writes it.
//! - `budget`: the reservations; `objects`: which code is the executable's (the only code a
//!   profile symbolises).

mod budget;
mod cpu;
mod objects;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use budget::{PROFILING_MEMORY_BOUND, SYMBOL_TABLE_BYTES};
pub use cpu::MAX_STACK_BYTES;
pub use objects::LoadedCode;

use budget::{BUDGET, Kind, Refusal};

/// What one CPU profile reserves besides the symbol tables: its sample slots (256 KiB), its
/// per-stack counts ([`MAX_STACK_BYTES`]) and the profile it encodes from them.
pub const CPU_PROFILE_BYTES: usize = 6 << 20;

/// What a heap profiler reserves besides the symbol tables unless it says otherwise (jemalloc's
/// dump, its parse and encoding: 5.7 MB measured on the stock binary, docs/benchmarks.md §6).
pub const HEAP_PROFILE_BYTES: usize = 6 << 20;

/// The longest CPU profile one request may ask for.
pub const MAX_PROFILE_SECONDS: u64 = 300;
/// What `/debug/pprof/profile` samples for without `?seconds`, as Go.
pub const DEFAULT_PROFILE_SECONDS: u64 = 30;

/// Makes heap profiles for `/debug/pprof/heap`. Implemented by the binary that chooses the
/// global allocator (the stock one plugs in jemalloc's sampling profiler); called on a blocking
/// thread.
pub trait HeapProfiler: Send + Sync + 'static {
    /// The live heap as a gzip-compressed pprof protobuf, or why there is none.
    fn heap_profile(&self) -> Result<Vec<u8>, String>;

    /// The most memory one [`Self::heap_profile`] holds while it runs besides the executable's
    /// symbol tables ([`SYMBOL_TABLE_BYTES`], reserved apart), reserved against
    /// [`PROFILING_MEMORY_BOUND`]; [`HEAP_PROFILE_BYTES`] unless the profiler knows better.
    fn memory_bound(&self) -> usize {
        HEAP_PROFILE_BYTES
    }
}

/// Why no profile was made.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A profile of this kind is running (one at a time: the sampler and the allocator's
    /// profiler are one per process).
    #[error("{0}")]
    Busy(String),
    /// Taking it would let the running profiles hold more than [`PROFILING_MEMORY_BOUND`].
    #[error("{0}")]
    OverBound(String),
    /// The profiler failed.
    #[error("could not take the {kind} profile: {message}")]
    Failed {
        /// `CPU` or `heap`.
        kind: &'static str,
        /// What went wrong.
        message: String,
    },
}

impl From<Refusal> for ProfileError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Busy(_) => ProfileError::Busy(refusal.to_string()),
            Refusal::OverBound { .. } => ProfileError::OverBound(refusal.to_string()),
        }
    }
}

/// A CPU profile of `duration` (cut short when `stop` fires or the caller goes away), gzipped
/// pprof protobuf.
pub async fn cpu_profile(
    duration: Duration,
    stop: &CancellationToken,
) -> Result<Vec<u8>, ProfileError> {
    let reservation = BUDGET.reserve(Kind::Cpu, CPU_PROFILE_BYTES)?;
    cpu::profile(duration, stop, reservation)
        .await
        .map_err(|message| ProfileError::Failed {
            kind: "CPU",
            message,
        })
}

/// A heap profile from `heap`, within the bound; the memory it took is given back afterwards.
pub async fn heap_profile(heap: &Arc<dyn HeapProfiler>) -> Result<Vec<u8>, ProfileError> {
    let reservation = BUDGET.reserve(Kind::Heap, heap.memory_bound())?;
    let profiler = heap.clone();
    let profile = tokio::task::spawn_blocking(move || {
        let profile = profiler.heap_profile();
        drop(reservation);
        profile
    });
    let failed = |message| ProfileError::Failed {
        kind: "heap",
        message,
    };
    match profile.await {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(message)) => Err(failed(message)),
        Err(e) => Err(failed(e.to_string())),
    }
}

/// Whether `/debug/pprof` is served, and where its heap profiles come from.
#[derive(Clone, Default)]
pub struct Profiling {
    /// `--profiling`: serve `/debug/pprof` at all.
    pub enabled: bool,
    /// The allocator's profiler; `None` answers `/debug/pprof/heap` with 501.
    pub heap: Option<Arc<dyn HeapProfiler>>,
}

impl std::fmt::Debug for Profiling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiling")
            .field("enabled", &self.enabled)
            .field("heap", &self.heap.is_some())
            .finish()
    }
}
