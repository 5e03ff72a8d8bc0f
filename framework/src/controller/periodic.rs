//! Periodic loops for controllers that poll instead of reacting to events (node lifecycle, route
//! sweeps, node address refresh), with client-go's `wait.Until` / `wait.NonSlidingUntil` timing.

use std::future::Future;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

/// When the next run of a periodic loop starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    /// `period` after the previous run *ended* (`wait.Until`).
    Sliding(Duration),
    /// `period` after the previous run *started*; a run that overruns starts the next at once
    /// (`wait.NonSlidingUntil`).
    NonSliding(Duration),
}

/// Runs `tick` immediately and then on `period` until `shutdown` is cancelled. A run in progress is
/// finished, not abandoned, when shutdown arrives.
pub async fn run_periodically<F, Fut>(period: Period, shutdown: CancellationToken, mut tick: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    match period {
        Period::Sliding(every) => loop {
            if shutdown.is_cancelled() {
                return;
            }
            tick().await;
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
        },
        Period::NonSliding(every) => {
            let mut interval =
                tokio::time::interval_at(Instant::now(), every.max(Duration::from_millis(1)));
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = interval.tick() => {}
                }
                tick().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn sliding_waits_after_each_run() {
        let runs = Arc::new(AtomicU32::new(0));
        let stop = CancellationToken::new();
        let r = runs.clone();
        let task = tokio::spawn(run_periodically(
            Period::Sliding(Duration::from_secs(10)),
            stop.clone(),
            move || {
                let r = r.clone();
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            },
        ));
        // Runs start at 0 s, 15 s, 30 s: each 5 s run is followed by a 10 s pause.
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        stop.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn non_sliding_keeps_the_start_schedule() {
        let runs = Arc::new(AtomicU32::new(0));
        let stop = CancellationToken::new();
        let r = runs.clone();
        let task = tokio::spawn(run_periodically(
            Period::NonSliding(Duration::from_secs(10)),
            stop.clone(),
            move || {
                let r = r.clone();
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            },
        ));
        // Runs start at 0 s, 10 s, 20 s, 30 s.
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 4);
        stop.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn stops_promptly_when_cancelled_between_runs() {
        let stop = CancellationToken::new();
        let task = tokio::spawn(run_periodically(
            Period::Sliding(Duration::from_secs(3600)),
            stop.clone(),
            || async {},
        ));
        tokio::task::yield_now().await;
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("loop should stop at once")
            .unwrap();
    }
}
