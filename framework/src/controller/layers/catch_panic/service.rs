//! The service half of the panic guard: catches panics raised while *creating* the future.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::task::{Context, Poll};

use tower::{BoxError, Service};

use super::{CatchPanicFuture, Panicked};

/// Wraps a reconcile service so that a panic in `call` or in its future becomes [`Panicked`].
#[derive(Clone, Debug)]
pub struct CatchPanic<S> {
    inner: S,
}

impl<S> CatchPanic<S> {
    /// Guards `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S, R> Service<R> for CatchPanic<S>
where
    S: Service<R>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = CatchPanicFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        match catch_unwind(AssertUnwindSafe(|| self.inner.poll_ready(cx))) {
            Ok(ready) => ready.map_err(Into::into),
            Err(payload) => Poll::Ready(Err(caught(payload.as_ref()).into())),
        }
    }

    fn call(&mut self, request: R) -> Self::Future {
        match catch_unwind(AssertUnwindSafe(|| self.inner.call(request))) {
            Ok(future) => CatchPanicFuture::new(future),
            Err(payload) => CatchPanicFuture::failed(caught(payload.as_ref())),
        }
    }
}

/// Logs a caught panic once, where it is caught.
pub(super) fn caught(payload: &(dyn std::any::Any + Send)) -> Panicked {
    let panicked = Panicked::from_payload(payload);
    tracing::error!(panic = %panicked.message, "reconcile panicked; it will be retried with backoff");
    panicked
}
