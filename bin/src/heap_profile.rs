//! The binary's allocator, jemalloc, and its sampling heap profiler behind `/debug/pprof/heap`.
//!
//! jemalloc records one allocation per 512 KiB allocated on average (`lg_prof_sample:19`, Go's
//! `MemProfileRate`), so a profile is there whenever asked for; with `--profiling=false` sampling
//! is switched off at start. docs/benchmarks.md has what this costs against glibc's malloc.

use controller_manager::admin::HeapProfiler;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Read by jemalloc at its first allocation (the prefixed build's name for `malloc_conf`).
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8] = b"prof:true,prof_active:true,lg_prof_sample:19\0";

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
        ctl.dump_pprof().map_err(|e| format!("{e:#}"))
    }
}

/// Stops sampling when nothing will ask for a profile.
pub async fn keep_sampling(profiling: bool) {
    if !profiling {
        jemalloc_pprof::deactivate_jemalloc_profiling().await;
    }
}
