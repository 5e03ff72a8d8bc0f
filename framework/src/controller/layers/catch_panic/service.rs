//! The service half of the panic guard: catches panics raised while *creating* the future.

use std::task::{Context, Poll};

use tower::{BoxError, Service};

use super::{CatchPanicFuture, caught};
use crate::panic_guard::catch;

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
        match catch(|| self.inner.poll_ready(cx)) {
            Ok(ready) => ready.map_err(Into::into),
            Err(panicked) => Poll::Ready(Err(caught(panicked).into())),
        }
    }

    fn call(&mut self, request: R) -> Self::Future {
        match catch(|| self.inner.call(request)) {
            Ok(future) => CatchPanicFuture::new(future),
            Err(panicked) => CatchPanicFuture::failed(caught(panicked)),
        }
    }
}
