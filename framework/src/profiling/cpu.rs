//! One CPU profile at a time: pprof-rs samples every thread at 100 Hz (Go's rate) for the asked
//! duration on a blocking thread, and the result is encoded as Go's `runtime/pprof` writes it,
//! a gzip-compressed `perftools.profiles.Profile`.

use std::io::Write;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use pprof::protos::Message;
use tokio_util::sync::CancellationToken;

/// Go's `runtime.SetCPUProfileRate` default.
const SAMPLES_PER_SECOND: i32 = 100;
/// Frames whose libraries are unsafe to unwind from a signal handler (pprof-rs's advice).
const BLOCKLIST: [&str; 4] = ["libc", "libgcc", "pthread", "vdso"];

/// Why no CPU profile was made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CpuProfileError {
    /// Another request is profiling; the sampler is process-wide.
    #[error("a CPU profile is already being taken; retry when it is done")]
    Busy,
    /// The sampler, the report or the encoding failed.
    #[error("could not take the CPU profile: {0}")]
    Failed(String),
}

/// Serialises CPU profiles: pprof-rs has one sampler per process.
#[derive(Clone, Default)]
pub(crate) struct CpuProfiler {
    running: Arc<tokio::sync::Mutex<()>>,
}

impl CpuProfiler {
    /// Samples for `duration` (less if `stop` fires first: what was sampled is returned) and
    /// returns the gzipped protobuf.
    pub(crate) async fn profile(
        &self,
        duration: Duration,
        stop: &CancellationToken,
    ) -> Result<Vec<u8>, CpuProfileError> {
        let turn = self
            .running
            .clone()
            .try_lock_owned()
            .map_err(|_| CpuProfileError::Busy)?;
        let (done, wait) = mpsc::channel::<()>();
        // The sampler's guard lives on a blocking thread: it is not `Send`, and building the
        // report symbolises every stack, which is CPU work.
        let sampling = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            let guard = pprof::ProfilerGuardBuilder::default()
                .frequency(SAMPLES_PER_SECOND)
                .blocklist(&BLOCKLIST)
                .build()
                .map_err(|e| CpuProfileError::Failed(e.to_string()))?;
            // Samples for the whole duration from the sampler's start, unless the server stops
            // (a message) or the client hung up (the sender is gone).
            let _ = wait.recv_timeout(duration);
            let report = guard
                .report()
                .build()
                .map_err(|e| CpuProfileError::Failed(e.to_string()))?;
            let profile = report
                .pprof()
                .map_err(|e| CpuProfileError::Failed(e.to_string()))?;
            gzip(&profile.encode_to_vec()).map_err(|e| CpuProfileError::Failed(e.to_string()))
        });
        tokio::pin!(sampling);
        let sampled = tokio::select! {
            sampled = &mut sampling => sampled,
            () = stop.cancelled() => {
                let _ = done.send(());
                sampling.await
            }
        };
        sampled.map_err(|e| CpuProfileError::Failed(e.to_string()))?
    }
}

/// `bytes` gzip-compressed, as Go's profile writer does.
fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes)?;
    encoder.finish()
}
