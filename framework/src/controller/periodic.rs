//! Periodic loops for controllers that poll instead of reacting to events (node lifecycle, route
//! sweeps, node address refresh), with client-go's `wait.Until` / `wait.NonSlidingUntil` timing,
//! and a panic guard around each run so one bad run never ends the loop.

use std::future::Future;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::scope::ControllerScope;
use crate::panic_guard::catch_future;

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
/// finished, not abandoned, when shutdown arrives — unless the manager abandons in-flight work
/// (lost leadership, the drain deadline), which drops it at once.
///
/// A run that panics is logged and the next run starts on schedule; inside a manager-run
/// controller (see [`ControllerScope`]) the panic is also counted in
/// `controller_runtime_reconcile_panics_total{controller}` and the controller's health check fails
/// until a later run completes.
pub async fn run_periodically<F, Fut>(period: Period, shutdown: CancellationToken, mut tick: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let scope = ControllerScope::current();
    // Outside a manager nothing abandons work: a token nobody cancels.
    let abandon = scope
        .as_ref()
        .map(|s| s.abandoned().clone())
        .unwrap_or_default();
    match period {
        Period::Sliding(every) => loop {
            if shutdown.is_cancelled() || !guarded_run(&mut tick, scope.as_ref(), &abandon).await {
                return;
            }
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
                if !guarded_run(&mut tick, scope.as_ref(), &abandon).await {
                    return;
                }
            }
        }
    }
}

/// One run under the panic guard; `false` when it was abandoned and the loop must end.
async fn guarded_run<F, Fut>(
    tick: &mut F,
    scope: Option<&ControllerScope>,
    abandon: &CancellationToken,
) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let outcome = tokio::select! {
        biased;
        () = abandon.cancelled() => return false,
        outcome = catch_future(tick) => outcome,
    };
    match (outcome, scope) {
        (Ok(()), Some(scope)) => scope.run_completed(),
        (Ok(()), None) => {}
        (Err(panicked), scope) => {
            tracing::error!(
                controller = scope.map(ControllerScope::name),
                panic = %panicked.message,
                "periodic run panicked; the next run starts on schedule"
            );
            if let Some(scope) = scope {
                scope.run_panicked(&panicked.message);
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// How many 5 s runs `period` starts in the first 31 s.
    async fn runs_in_31s(period: Period) -> u32 {
        let runs = Arc::new(AtomicU32::new(0));
        let stop = CancellationToken::new();
        let r = runs.clone();
        let task = tokio::spawn(run_periodically(period, stop.clone(), move || {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }));
        tokio::time::sleep(Duration::from_secs(31)).await;
        let started = runs.load(Ordering::SeqCst);
        stop.cancel();
        task.await.unwrap();
        started
    }

    #[tokio::test(start_paused = true)]
    async fn sliding_waits_after_each_run() {
        // Runs start at 0 s, 15 s, 30 s: each 5 s run is followed by a 10 s pause.
        assert_eq!(
            runs_in_31s(Period::Sliding(Duration::from_secs(10))).await,
            3
        );
    }

    #[tokio::test(start_paused = true)]
    async fn non_sliding_keeps_the_start_schedule() {
        // Runs start at 0 s, 10 s, 20 s, 30 s.
        assert_eq!(
            runs_in_31s(Period::NonSliding(Duration::from_secs(10))).await,
            4
        );
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

    #[tokio::test(start_paused = true)]
    async fn a_panicking_run_is_counted_and_the_next_run_starts_on_schedule() {
        let runs = Arc::new(AtomicU32::new(0));
        let stop = CancellationToken::new();
        let panics = prometheus_client::metrics::counter::Counter::default();
        let scope = ControllerScope::new("loop", panics.clone(), CancellationToken::new());
        let r = runs.clone();
        let task = tokio::spawn(scope.clone().scope(run_periodically(
            Period::NonSliding(Duration::from_secs(10)),
            stop.clone(),
            move || {
                let n = r.fetch_add(1, Ordering::SeqCst);
                // Run 0 panics before returning its future, run 1 while it is polled.
                assert!(n != 0, "run 0 panicked");
                async move {
                    assert!(n != 1, "run 1 panicked");
                }
            },
        )));
        tokio::time::sleep(Duration::from_secs(15)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert_eq!(panics.get(), 2);
        let health = scope.check().unwrap_err();
        assert!(
            health.contains("last periodic run panicked: run 1 panicked"),
            "{health}"
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        assert_eq!(scope.check(), Ok(()), "a completed run clears the panic");
        stop.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_abandoned_run_is_dropped_and_ends_the_loop() {
        let abandon = CancellationToken::new();
        let scope = ControllerScope::new("loop", Default::default(), abandon.clone());
        let task = tokio::spawn(scope.scope(run_periodically(
            Period::Sliding(Duration::from_secs(1)),
            CancellationToken::new(),
            std::future::pending::<()>,
        )));
        tokio::time::sleep(Duration::from_secs(60)).await;
        abandon.cancel();
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("the stuck run is dropped at once")
            .unwrap();
    }
}
