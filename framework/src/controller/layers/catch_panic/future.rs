//! The future half of the panic guard: catches panics raised while *polling* the reconcile.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower::BoxError;

use super::{Panicked, caught};
use crate::panic_guard::catch;

pin_project! {
    /// Resolves to the inner result, or to [`Panicked`] if the inner future panicked.
    #[derive(Debug)]
    pub struct CatchPanicFuture<F> {
        #[pin]
        inner: Option<F>,
        failed: Option<Panicked>,
    }
}

impl<F> CatchPanicFuture<F> {
    pub(super) fn new(inner: F) -> Self {
        Self {
            inner: Some(inner),
            failed: None,
        }
    }

    pub(super) fn failed(panicked: Panicked) -> Self {
        Self {
            inner: None,
            failed: Some(panicked),
        }
    }
}

impl<F, T, E> Future for CatchPanicFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some(panicked) = this.failed.take() {
            return Poll::Ready(Err(panicked.into()));
        }
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            return Poll::Ready(Err(Panicked {
                message: "reconcile future polled after completion".to_owned(),
            }
            .into()));
        };
        match catch(|| inner.poll(cx)) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(result)) => {
                this.inner.set(None);
                Poll::Ready(result.map_err(Into::into))
            }
            Err(panicked) => {
                let panicked = caught(panicked);
                // Never poll a future again after it panicked; dropping it may panic as well.
                let _ = catch(|| this.inner.set(None));
                Poll::Ready(Err(panicked.into()))
            }
        }
    }
}
