//! The future half of the tracing layer: polls inside the span and records the outcome on it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tower::BoxError;
use tracing::Span;

use crate::controller::Action;

pin_project! {
    /// A reconcile future that runs inside its `reconcile` span.
    #[derive(Debug)]
    pub struct TraceFuture<F> {
        #[pin]
        inner: F,
        span: Span,
    }
}

impl<F> TraceFuture<F> {
    pub(super) fn new(inner: F, span: Span) -> Self {
        Self { inner, span }
    }
}

impl<F, E> Future for TraceFuture<F>
where
    F: Future<Output = Result<Action, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Action, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let result = ready!(this.inner.poll(cx)).map_err(Into::into);
        match &result {
            Ok(Action::Done) => {
                this.span.record("outcome", "done");
            }
            Ok(Action::RequeueAfter(after)) => {
                this.span.record("outcome", "requeue_after");
                this.span
                    .record("requeue_after", tracing::field::debug(after));
            }
            Err(error) => {
                this.span.record("outcome", "error");
                this.span.record("error", tracing::field::display(error));
            }
        }
        tracing::debug!("reconcile finished");
        super::followup::offer(this.span);
        Poll::Ready(result)
    }
}
