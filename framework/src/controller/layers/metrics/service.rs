//! The service half of the metrics layer: counts the reconcile as active when it starts.

use std::task::{Context, Poll};

use tower::{BoxError, Service};

use super::future::ActiveGuard;
use super::{MetricsFuture, ReconcileMetrics};
use crate::controller::{Action, Request};

/// Measures each reconcile of the wrapped service.
#[derive(Clone, Debug)]
pub struct Metrics<S> {
    inner: S,
    metrics: ReconcileMetrics,
}

impl<S> Metrics<S> {
    pub(super) fn new(inner: S, metrics: ReconcileMetrics) -> Self {
        Self { inner, metrics }
    }
}

impl<S, K> Service<Request<K>> for Metrics<S>
where
    S: Service<Request<K>, Response = Action>,
    S::Error: Into<BoxError>,
{
    type Response = Action;
    type Error = BoxError;
    type Future = MetricsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<K>) -> Self::Future {
        // The guard is live before the inner call, so even a panic there leaves the gauge right.
        let active = ActiveGuard::start(&self.metrics);
        let future = self.inner.call(request);
        MetricsFuture::new(future, active)
    }
}
