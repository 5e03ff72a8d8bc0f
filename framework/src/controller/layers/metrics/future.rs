//! The future half of the metrics layer: records duration and result when the reconcile ends.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower::BoxError;

use super::ReconcileMetrics;
use crate::controller::{Action, Panicked};

/// Keeps `active_workers` raised while a reconcile runs, including one that is dropped early.
#[derive(Debug)]
pub(super) struct ActiveGuard {
    metrics: ReconcileMetrics,
    started: Instant,
}

impl ActiveGuard {
    pub(super) fn start(metrics: &ReconcileMetrics) -> Self {
        metrics.active.inc();
        Self {
            metrics: metrics.clone(),
            started: Instant::now(),
        }
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.metrics.active.dec();
    }
}

pin_project! {
    /// A reconcile future whose completion is counted and timed.
    #[derive(Debug)]
    pub struct MetricsFuture<F> {
        #[pin]
        inner: F,
        active: Option<ActiveGuard>,
    }
}

impl<F> MetricsFuture<F> {
    pub(super) fn new(inner: F, active: ActiveGuard) -> Self {
        Self {
            inner,
            active: Some(active),
        }
    }
}

impl<F, E> Future for MetricsFuture<F>
where
    F: Future<Output = Result<Action, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Action, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx)).map_err(Into::into);
        if let Some(active) = this.active.take() {
            let m = &active.metrics;
            m.time.observe(active.started.elapsed().as_secs_f64());
            match &result {
                Ok(Action::Done) => m.success.inc(),
                Ok(Action::RequeueAfter(_)) => m.requeue_after.inc(),
                Err(error) => {
                    if is_panic(error) {
                        m.panics.inc();
                    }
                    // A `RetryAfter` is an error too, as controller-runtime counts a returned error.
                    m.errors.inc();
                    m.error.inc()
                }
            };
        }
        Poll::Ready(result)
    }
}

fn is_panic(error: &BoxError) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(&**error);
    while let Some(e) = current {
        if e.is::<Panicked>() {
            return true;
        }
        current = e.source();
    }
    false
}
