//! The binary's allocator, jemalloc, and its sampling heap profiler behind `/debug/pprof/heap`.
//!
//! jemalloc records one allocation per 512 KiB allocated on average (`lg_prof_sample:19`, Go's
//! `MemProfileRate`), so a profile is there whenever asked for; with `--profiling=false` sampling
//! is switched off at start. docs/benchmarks.md has what this costs against glibc's malloc, and
//! what a profile holds while it is made (§6).

use controller_manager::admin::HeapProfiler;
use controller_manager::profiling::LoadedCode;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Read by jemalloc at its first allocation (the prefixed build's name for `malloc_conf`).
/// `background_thread` purges freed pages on time in every arena: without it an arena purges
/// only when its own threads allocate, so what a thread that has since gone idle freed (a
/// profile's symbol tables, a burst's buffers) stayed resident (docs/benchmarks.md §6).
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8] =
    b"prof:true,prof_active:true,lg_prof_sample:19,background_thread:true\0";

/// jemalloc's heap dump, as pprof protobuf (jemalloc_pprof).
pub struct JemallocHeap;

impl HeapProfiler for JemallocHeap {
    fn heap_profile(&self) -> Result<Vec<u8>, String> {
        let ctl = jemalloc_pprof::PROF_CTL
            .as_ref()
            .ok_or("jemalloc runs without prof:true, so it has no heap profile")?;
        let mut ctl = ctl.blocking_lock();
        if !ctl.activated() {
            return Err("heap sampling is off (--profiling=false)".to_string());
        }
        let mut profile = ctl.dump_profile().map_err(|e| format!("{e:#}"))?;
        // Only the executable's frames are symbolised (each a return address, so one byte back):
        // the shared libraries' are the threads' outermost frames (libc's start_thread), and
        // symbolising them would read libc's debug file where the host has one.
        let code = LoadedCode::of_this_process();
        for (stack, _) in &mut profile.stacks {
            stack
                .addrs
                .retain(|&address| code.in_executable(address.saturating_sub(1)));
        }
        Ok(profile.to_pprof(("inuse_space", "bytes"), ("space", "bytes"), None))
    }
}

/// Stops sampling when nothing will ask for a profile.
pub async fn keep_sampling(profiling: bool) {
    if !profiling {
        jemalloc_pprof::deactivate_jemalloc_profiling().await;
    }
}
