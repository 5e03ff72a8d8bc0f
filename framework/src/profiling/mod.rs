//! The process's profilers, for `/debug/pprof` (`--profiling`): the CPU sampler and the heap
//! profiler hook a binary plugs in for its allocator.
//!
//! - `cpu`: one CPU profile at a time, encoded as Go's `runtime/pprof` writes it.

mod cpu;

use std::sync::Arc;

pub(crate) use cpu::{CpuProfileError, CpuProfiler};

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
