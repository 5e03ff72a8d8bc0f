//! The service half of the tracing layer: opens the span and enters it for `call`.

use std::fmt::Display;
use std::task::{Context, Poll};

use tower::{BoxError, Service};
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::TraceFuture;
use crate::controller::{Action, Request};

/// Runs each reconcile inside a `reconcile` span.
#[derive(Clone, Debug)]
pub struct Trace<S> {
    inner: S,
}

impl<S> Trace<S> {
    /// Traces `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S, K> Service<Request<K>> for Trace<S>
where
    S: Service<Request<K>, Response = Action>,
    S::Error: Into<BoxError>,
    K: Display,
{
    type Response = Action;
    type Error = BoxError;
    type Future = TraceFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<K>) -> Self::Future {
        // A root whatever span the worker runs in: one trace per reconcile, joined to its causes
        // by links rather than by parenthood (a deduplicated key has several causes).
        let span = tracing::info_span!(
            parent: None,
            "reconcile",
            controller = %request.controller,
            object.ref = %request.key,
            reason = request.cause.reason.as_str(),
            attempt = request.attempt,
            queue.adds = request.cause.adds,
            outcome = Empty,
            requeue_after = Empty,
            error = Empty,
        );
        for link in &request.cause.links {
            span.add_link(link.clone());
        }
        let future = span.in_scope(|| self.inner.call(request));
        TraceFuture::new(future, span)
    }
}
