//! Periodic loops for controllers that poll instead of reacting to events (node lifecycle, route
//! sweeps, node address refresh), with client-go's `wait.Until` / `wait.NonSlidingUntil` timing.
//!
//! Each pass is one call of a service behind [`layers::standard`], the stack every queue-driven
//! reconcile runs behind: a `reconcile` span (`reason=periodic`, `object.ref=*`), the
//! `controller_runtime_reconcile_*` metrics under the loop's name, and the panic guard, so a
//! panicking pass is caught, logged and counted as a panicking reconcile is, and never ends the
//! loop. A pass has no deadline (a pass may be paced over its whole period).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tower::{BoxError, Service, ServiceExt};

use super::layers::{self, ControllerMetrics};
use super::scope::ControllerScope;
use super::{Action, Panicked, Request};
use crate::workqueue::{AddReason, Cause};

/// The key of a periodic pass, `*` in its `reconcile` span: a pass looks at every object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PassKey;

impl std::fmt::Display for PassKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("*")
    }
}

/// The standard stack's timeout for a pass: none (tokio's timer takes a deadline this far as
/// "never"), since a pass may be paced over its whole period, however long that is.
const NO_DEADLINE: Duration = Duration::MAX;

/// When the next run of a periodic loop starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    /// `period` after the previous run *ended* (`wait.Until`).
    Sliding(Duration),
    /// `period` after the previous run *started*; a run that overruns starts the next at once
    /// (`wait.NonSlidingUntil`).
    NonSliding(Duration),
}

/// A controller's periodic loop: its name in spans, metrics and logs, its schedule, and the
/// metric families its passes count in.
#[derive(Clone, Debug)]
pub struct Periodic {
    name: Arc<str>,
    period: Period,
    metrics: ControllerMetrics,
}

impl Periodic {
    /// A loop named `name` (the controller's canonical name, or that name qualified when the
    /// controller also has workers, e.g. `cloud-node-controller/address-refresh`) running on
    /// `period`, counted in `metrics`.
    pub fn new(name: impl Into<Arc<str>>, period: Period, metrics: &ControllerMetrics) -> Self {
        Self {
            name: name.into(),
            period,
            metrics: metrics.clone(),
        }
    }

    /// Runs `tick` immediately and then on the period until `shutdown` is cancelled. A run in
    /// progress is finished, not abandoned, when shutdown arrives — unless the manager abandons
    /// in-flight work (lost leadership, the drain deadline), which drops it at once.
    ///
    /// A pass that fails or panics is logged and the next one starts on schedule; inside a
    /// manager-run controller (see [`ControllerScope`]) a panic also fails the controller's health
    /// check until a later pass completes.
    pub async fn run<F, Fut, E>(self, shutdown: CancellationToken, mut tick: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Into<BoxError>,
    {
        let mut service = layers::standard(&self.name, &self.metrics, NO_DEADLINE).service_fn(
            move |_: Request<PassKey>| {
                let pass = tick();
                async move { pass.await.map(|()| Action::Done) }
            },
        );
        let scope = ControllerScope::current();
        // Outside a manager nothing abandons work: a token nobody cancels.
        let abandon = scope
            .as_ref()
            .map(|s| s.abandoned().clone())
            .unwrap_or_default();
        match self.period {
            Period::Sliding(every) => loop {
                if shutdown.is_cancelled()
                    || !self.pass(&mut service, scope.as_ref(), &abandon).await
                {
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
                    if !self.pass(&mut service, scope.as_ref(), &abandon).await {
                        return;
                    }
                }
            }
        }
    }

    /// One pass through the layers; `false` when it was abandoned and the loop must end.
    async fn pass<S>(
        &self,
        service: &mut S,
        scope: Option<&ControllerScope>,
        abandon: &CancellationToken,
    ) -> bool
    where
        S: Service<Request<PassKey>, Response = Action, Error = BoxError>,
    {
        let request = Request {
            key: PassKey,
            controller: Arc::clone(&self.name),
            attempt: 0,
            cause: Cause {
                reason: AddReason::Periodic,
                links: Vec::new(),
                adds: 0,
            },
        };
        let result = tokio::select! {
            biased;
            () = abandon.cancelled() => return false,
            result = call(service, request) => result,
        };
        if let Err(error) = result {
            if let Some(panicked) = error.downcast_ref::<Panicked>() {
                tracing::error!(controller = %self.name, panic = %panicked.message,
                    "periodic pass panicked; the next pass starts on schedule");
                if let Some(scope) = scope {
                    scope.run_panicked(&panicked.message);
                }
                return true;
            }
            tracing::error!(controller = %self.name, %error,
                "periodic pass failed; the next pass starts on schedule");
        }
        if let Some(scope) = scope {
            scope.run_completed();
        }
        true
    }
}

/// Waits for the service and calls it.
async fn call<S>(service: &mut S, request: Request<PassKey>) -> Result<Action, BoxError>
where
    S: Service<Request<PassKey>, Response = Action, Error = BoxError>,
{
    service.ready().await?.call(request).await
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use prometheus_client::registry::Registry;

    use super::*;

    fn unregistered() -> ControllerMetrics {
        ControllerMetrics::new(&mut Registry::default())
    }

    fn encode(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
        text
    }

    /// How many 5 s runs `period` starts in the first 31 s.
    async fn runs_in_31s(period: Period) -> u32 {
        let runs = Arc::new(AtomicU32::new(0));
        let stop = CancellationToken::new();
        let r = runs.clone();
        let task = tokio::spawn(Periodic::new("loop", period, &unregistered()).run(
            stop.clone(),
            move || {
                let r = r.clone();
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    Ok::<(), Infallible>(())
                }
            },
        ));
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
        let periodic = Periodic::new(
            "loop",
            Period::Sliding(Duration::from_secs(3600)),
            &unregistered(),
        );
        let task = tokio::spawn(periodic.run(stop.clone(), || async { Ok::<(), Infallible>(()) }));
        tokio::task::yield_now().await;
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("loop should stop at once")
            .unwrap();
    }

    /// A pass is a reconcile for the metrics: counted by result under the loop's name, and a
    /// panicking pass in `controller_runtime_reconcile_panics_total` as a panicking reconcile.
    #[tokio::test(start_paused = true)]
    async fn a_panicking_run_is_counted_and_the_next_run_starts_on_schedule() {
        let runs = Arc::new(AtomicU32::new(0));
        let stop = CancellationToken::new();
        let mut registry = Registry::default();
        let metrics = ControllerMetrics::new(&mut registry);
        let scope = ControllerScope::new("loop", CancellationToken::new());
        let r = runs.clone();
        let periodic = Periodic::new(
            "loop/pass",
            Period::NonSliding(Duration::from_secs(10)),
            &metrics,
        );
        let task = tokio::spawn(scope.clone().scope(periodic.run(stop.clone(), move || {
            let n = r.fetch_add(1, Ordering::SeqCst);
            // Run 0 panics before returning its future, run 1 while it is polled, run 2 fails.
            assert!(n != 0, "run 0 panicked");
            async move {
                assert!(n != 1, "run 1 panicked");
                if n == 2 { Err("run 2 failed") } else { Ok(()) }
            }
        })));
        tokio::time::sleep(Duration::from_secs(15)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        let health = scope.check().unwrap_err();
        assert!(
            health.contains("last periodic run panicked: run 1 panicked"),
            "{health}"
        );
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 4);
        assert_eq!(scope.check(), Ok(()), "a completed run clears the panic");
        let text = encode(&registry);
        for line in [
            "controller_runtime_reconcile_panics_total{controller=\"loop/pass\"} 2",
            "controller_runtime_reconcile_errors_total{controller=\"loop/pass\"} 3",
            "controller_runtime_reconcile_total{controller=\"loop/pass\",result=\"error\"} 3",
            "controller_runtime_reconcile_total{controller=\"loop/pass\",result=\"success\"} 1",
            "controller_runtime_reconcile_time_seconds_count{controller=\"loop/pass\"} 4",
            "controller_runtime_active_workers{controller=\"loop/pass\"} 0",
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
        stop.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_abandoned_run_is_dropped_and_ends_the_loop() {
        let abandon = CancellationToken::new();
        let scope = ControllerScope::new("loop", abandon.clone());
        let periodic = Periodic::new(
            "loop",
            Period::Sliding(Duration::from_secs(1)),
            &unregistered(),
        );
        let task = tokio::spawn(scope.scope(periodic.run(
            CancellationToken::new(),
            std::future::pending::<Result<(), Infallible>>,
        )));
        tokio::time::sleep(Duration::from_secs(60)).await;
        abandon.cancel();
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("the stuck run is dropped at once")
            .unwrap();
    }
}
