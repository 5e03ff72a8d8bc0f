//! A `reconcile` span per call, so every log line a reconcile emits (and every child span for
//! cloud or API calls) carries the controller, the object and the attempt.
//!
//! The span is always a root (one trace per reconcile, whatever span the worker runs in) and is
//! linked to the `enqueue` spans of the adds that caused it, taken from the request's
//! [`Cause`](crate::workqueue::Cause): a key deduplicated in the queue carries one link per add it
//! absorbed, up to [`MAX_LINKS`](crate::workqueue::MAX_LINKS). Links instead of a parent because a
//! reconcile can have many causes, and because a watch event's trace should not grow by every
//! reconcile it triggers (OpenTelemetry's model for batch consumers).
//!
//! The worker's requeue after the reconcile (backoff, `RequeueAfter`, `RetryAfter`) runs inside
//! the finished span ([`followup`]), so a retry links to the reconcile that asked for it.
//!
//! Span fields: `controller`, `object.ref` (the key's `Display`), `reason` (the first add's kind:
//! `add`, `add_after`, `rate_limited`), `attempt`, `queue.adds` (adds deduplicated into this
//! run), and on completion `outcome` (`done`, `requeue_after` or `error`), `requeue_after` and
//! `error`.

pub(crate) mod followup;
mod future;
mod layer;
mod service;

pub use future::TraceFuture;
pub use layer::TraceLayer;
pub use service::Trace;

#[cfg(test)]
mod tests;
