//! Turning a reconcile's result into queue operations, and the error that asks for a fixed delay.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use tower::BoxError;

use super::Action;
use crate::workqueue::{QueueKey, WorkQueue};

/// Returned (or wrapped as a `source()`) by a reconcile that knows when retrying makes sense,
/// e.g. a cloud API that answered "try again in 30 s": the key is re-added after exactly `after`,
/// without counting as a failure for the exponential backoff (upstream `api.RetryError`).
///
/// Made with [`RetryAfter::caused_by`], it wraps the error that asked for the delay, as upstream's
/// `RetryError` does: its message is that error's, and `source()` is that error, so the chain
/// below it (a cloud error inside a controller error, ...) is kept for logs and `errors.As`.
#[derive(Debug, Clone)]
pub struct RetryAfter {
    /// How long to wait before the next attempt.
    pub after: Duration,
    /// Why the reconcile must wait; shown in logs.
    pub message: String,
    /// The error that asked for the delay, if any.
    source: Option<Arc<dyn Error + Send + Sync + 'static>>,
}

impl RetryAfter {
    /// Asks for a retry after `after`, explaining why in `message`.
    pub fn new(after: Duration, message: impl Into<String>) -> Self {
        Self {
            after,
            message: message.into(),
            source: None,
        }
    }

    /// Asks for a retry after `after` because of `err`, which stays reachable as the source.
    pub fn caused_by(after: Duration, err: impl Error + Send + Sync + 'static) -> Self {
        Self {
            after,
            message: err.to_string(),
            source: Some(Arc::new(err)),
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

impl std::fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (retry after {:?})", self.message, self.after)
    }
}

impl Error for RetryAfter {
    /// The wrapped error itself (not the `Arc` around it), so a walk of the chain meets it.
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
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
