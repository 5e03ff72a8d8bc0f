//! A `reconcile` span per call, so every log line a reconcile emits (and every child span for
//! cloud or API calls) carries the controller, the object and the attempt.
//!
//! Span fields: `controller`, `object.ref` (the key's `Display`), `attempt`, and on completion
//! `outcome` (`done`, `requeue_after` or `error`), `requeue_after` and `error`.

mod future;
mod layer;
mod service;

pub use future::TraceFuture;
pub use layer::TraceLayer;
pub use service::Trace;
