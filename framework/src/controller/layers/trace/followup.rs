//! Hands the finished `reconcile` span back to the worker that ran it, so the requeue the worker
//! makes from the outcome (`RequeueAfter`, an error's backoff or `RetryAfter`) opens its `enqueue`
//! span inside the reconcile's trace, and the next attempt links back to the one that failed.
//!
//! A tower service cannot return anything but its response, so the hand-back goes through a
//! task-local slot: the worker runs each call inside [`scope`]; [`TraceFuture`](super::TraceFuture)
//! puts a handle to its span there when it completes. If a layer moves the reconcile to another
//! task (e.g. `tower::buffer`), the slot is not visible there and the requeue simply has no
//! parent, as before.

use std::cell::RefCell;
use std::future::Future;

use tracing::Span;

tokio::task_local! {
    static FINISHED: RefCell<Option<Span>>;
}

/// Runs `call` and returns its output with the span of the reconcile it ran, if a
/// [`TraceLayer`](super::TraceLayer) on this task made one.
pub(crate) async fn scope<F: Future>(call: F) -> (F::Output, Option<Span>) {
    FINISHED
        .scope(RefCell::new(None), async {
            let output = call.await;
            let span = FINISHED.with(|slot| slot.borrow_mut().take());
            (output, span)
        })
        .await
}

/// Offers `span` to the enclosing [`scope`], if any; the outermost trace layer finishes last and
/// wins.
pub(super) fn offer(span: &Span) {
    let _ = FINISHED.try_with(|slot| *slot.borrow_mut() = Some(span.clone()));
}
