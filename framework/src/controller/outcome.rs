//! Turning a reconcile's result into queue operations, and the error that asks for a fixed delay.

use std::error::Error;
use std::time::Duration;

use tower::BoxError;

use super::Action;
use crate::workqueue::{QueueKey, WorkQueue};

/// Returned (or wrapped as a `source()`) by a reconcile that knows when retrying makes sense,
/// e.g. a cloud API that answered "try again in 30 s": the key is re-added after exactly `after`,
/// without counting as a failure for the exponential backoff (upstream `api.RetryError`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} (retry after {after:?})")]
pub struct RetryAfter {
    /// How long to wait before the next attempt.
    pub after: Duration,
    /// Why the reconcile must wait; shown in logs.
    pub message: String,
}

impl RetryAfter {
    /// Asks for a retry after `after`, explaining why in `message`.
    pub fn new(after: Duration, message: impl Into<String>) -> Self {
        Self {
            after,
            message: message.into(),
        }
    }

    /// Finds a `RetryAfter` in `err` or its chain of sources (Go's `errors.As`).
    pub fn find<'a>(err: &'a (dyn Error + 'static)) -> Option<&'a RetryAfter> {
        let mut current = Some(err);
        while let Some(e) = current {
            if let Some(retry) = e.downcast_ref::<RetryAfter>() {
                return Some(retry);
            }
            current = e.source();
        }
        None
    }
}

/// Applies client-go's worker contract for one finished reconcile (the caller then calls `done`).
pub(super) fn requeue<K: QueueKey>(
    queue: &WorkQueue<K>,
    controller: &str,
    key: &K,
    result: Result<Action, BoxError>,
) {
    match result {
        Ok(Action::Done) => queue.forget(key),
        Ok(Action::RequeueAfter(after)) => {
            queue.forget(key);
            queue.add_after(key.clone(), after);
        }
        Err(error) => match RetryAfter::find(&*error) {
            Some(retry) => {
                tracing::info!(controller, key = ?key, after = ?retry.after, error = %error,
                    "reconcile asked to retry later");
                queue.add_after(key.clone(), retry.after);
            }
            None => {
                tracing::error!(controller, key = ?key, error = %error,
                    "reconcile failed; requeued with backoff");
                queue.add_rate_limited(key.clone());
            }
        },
    }
}
