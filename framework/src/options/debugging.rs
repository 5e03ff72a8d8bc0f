//! Upstream's debugging flags: `--profiling` (served: `/debug/pprof` on the admin port) and
//! `--contention-profiling` (refused when true: a tokio process has no Go block profile), and the
//! heap-profiler hook a binary plugs in beside them.

use std::sync::Arc;

use super::{EndHelpHeading, GoBoolArg};
use clap::Args;

use crate::profiling::HeapProfiler;

/// `--profiling`, `--contention-profiling`, and the binary's heap profiler (not a flag).
#[derive(Args, Clone, Default)]
#[command(next_help_heading = "Debugging flags", end_help_heading = true)]
pub struct DebuggingOptions {
    /// Enable profiling via web interface host:port/debug/pprof/: CPU (/debug/pprof/profile?seconds=N, N from 1 to 300) and heap (/debug/pprof/heap) profiles in pprof format, behind the same authentication and authorization as /metrics.
    #[arg(long, go_bool = true, verbatim_doc_comment)]
    pub profiling: bool,

    /// Enable block profiling, if profiling is enabled. Refused when true: tokio has no block profile (see where tasks wait with tokio-console instead).
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub contention_profiling: bool,

    /// What `/debug/pprof/heap` profiles with; set by the binary that picks the global
    /// allocator (the stock binary plugs in jemalloc's). Not a flag.
    #[arg(skip)]
    pub heap_profiler: Option<Arc<dyn HeapProfiler>>,
}

impl std::fmt::Debug for DebuggingOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebuggingOptions")
            .field("profiling", &self.profiling)
            .field("contention_profiling", &self.contention_profiling)
            .field("heap_profiler", &self.heap_profiler.is_some())
            .finish()
    }
}

impl DebuggingOptions {
    /// One message per flag whose value asks for something this build cannot do.
    pub fn validate(&self) -> Vec<String> {
        let mut errors = Vec::new();
        if self.contention_profiling {
            errors.push(
                "--contention-profiling=true: tokio has no block profile to turn on (tokio-console shows where tasks wait); remove the flag".to_string(),
            );
        }
        errors
    }
}
