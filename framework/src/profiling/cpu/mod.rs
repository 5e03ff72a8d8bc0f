//! CPU profiles, one at a time in the process (the caller's [`Reservation`] of the CPU kind
//! says so): the sampler (`sampler`, Linux only) records every thread's stack 100 times a second
//! of CPU time into fixed slots, a blocking thread drains them every 50 ms into per-stack counts (`stacks`, within [`MAX_STACK_BYTES`]), and the result is
//! symbolised and encoded as Go's `runtime/pprof` writes it (`encode`), gzip-compressed. The
//! slots, the counts and the symbol tables are freed when the profile is returned.

mod encode;
#[cfg(target_os = "linux")]
mod sampler;
mod stacks;

use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::budget::Reservation;

/// The most the per-stack counts of one profile hold; samples of stacks first seen past it are
/// counted as dropped.
pub const MAX_STACK_BYTES: usize = 4 << 20;

/// Samples for `duration` (less if `stop` fires first or the caller goes away: what was sampled
/// is returned) and returns the gzipped protobuf. `reservation` is held until the profile is
/// encoded and its memory freed, on the sampling thread, even when the caller went away first.
pub(super) async fn profile(
    duration: Duration,
    stop: &CancellationToken,
    reservation: Reservation<'static>,
) -> Result<Vec<u8>, String> {
    let (done, wait) = mpsc::channel::<()>();
    // Sampling and draining block a thread; symbolising every address is CPU work.
    let sampling = tokio::task::spawn_blocking(move || {
        let profile = record(duration, &wait);
        drop(reservation);
        profile
    });
    tokio::pin!(sampling);
    let sampled = tokio::select! {
        sampled = &mut sampling => sampled,
        () = stop.cancelled() => {
            let _ = done.send(());
            sampling.await
        }
    };
    sampled.map_err(|e| e.to_string())?
}

/// How often the sample slots are emptied into the counts.
#[cfg(target_os = "linux")]
const DRAIN_EVERY: Duration = Duration::from_millis(50);

/// Samples until `duration` has passed since the sampler started, a message arrives, or its
/// sender is gone; then encodes.
#[cfg(target_os = "linux")]
fn record(duration: Duration, wait: &mpsc::Receiver<()>) -> Result<Vec<u8>, String> {
    use std::time::{Instant, SystemTime};

    let start = SystemTime::now();
    let started = Instant::now();
    let running = sampler::Running::start().map_err(|e| e.to_string())?;
    let mut stacks = stacks::Stacks::new(MAX_STACK_BYTES);
    loop {
        let left = duration.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        match wait.recv_timeout(left.min(DRAIN_EVERY)) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        running.sampler().drain(|frames| stacks.add(frames));
    }
    running.stop_timer();
    let elapsed = started.elapsed();
    running.sampler().drain(|frames| stacks.add(frames));
    let (overflowed, skipped) = running.sampler().lost();
    drop(running);
    let lost = encode::Lost {
        overflowed,
        skipped,
        dropped: stacks.dropped,
    };
    let period = Duration::from_secs(1) / sampler::SAMPLES_PER_SECOND;
    let profile = encode::profile(&stacks, lost, period, start, elapsed);
    drop(stacks);
    gzip(&pprof::protos::Message::encode_to_vec(&profile)).map_err(|e| e.to_string())
}

#[cfg(not(target_os = "linux"))]
fn record(_: Duration, _: &mpsc::Receiver<()>) -> Result<Vec<u8>, String> {
    Err("the CPU sampler needs Linux (setitimer and SIGPROF with the thread's context)".to_string())
}

/// `bytes` gzip-compressed, as Go's profile writer does.
fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes)?;
    encoder.finish()
}
