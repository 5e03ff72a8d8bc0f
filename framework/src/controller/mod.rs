//! Controllers: a name, a work-queue lane, a `tower::Service` that reconciles one key, and N
//! workers that feed the lane to the service.
//!
//! A reconcile is an ordinary service call: `Service<Request<K>, Response = Action>`. That makes
//! tracing, metrics, timeouts and panic guarding ordinary tower layers ([`layers`]) that a user
//! can stack, reorder or replace, and lets any tower middleware (concurrency limits, load
//! shedding) sit in front of a reconciler; workers respect `poll_ready` backpressure.
//!
//! The outcome drives the queue the way client-go's canonical worker does: [`Action::Done`]
//! forgets the key's backoff; [`Action::RequeueAfter`] forgets it and re-adds the key after the
//! delay; an `Err` re-adds it through the rate limiter, unless the error is (or wraps) a
//! [`RetryAfter`], which re-adds it after exactly that delay without touching the backoff
//! (upstream's `api.RetryError`).

pub mod layers;
mod outcome;
mod periodic;
mod runner;
mod scope;

use std::sync::Arc;
use std::time::Duration;

pub use layers::catch_panic::Panicked;
pub use outcome::RetryAfter;
pub use periodic::{PassKey, Period, Periodic};
pub use runner::Controller;
pub use scope::ControllerScope;

use crate::workqueue::Cause;

/// What a reconcile is asked to do: bring the object behind `key` to its desired state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request<K> {
    /// The object to reconcile (e.g. a name or namespace/name).
    pub key: K,
    /// The controller's name, so shared services and layers can label their output.
    pub controller: Arc<str>,
    /// How many rate-limited retries preceded this run (0 on the first try or after success).
    pub attempt: u32,
    /// Why the queue handed the key out: the add's kind and the trace contexts of the adds it
    /// absorbed, which [`layers::TraceLayer`] turns into span links.
    pub cause: Cause,
}

/// How a successful reconcile wants its key treated next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The object is in its desired state: forget its backoff, wait for the next event.
    Done,
    /// Look again after this long even without an event (e.g. polling a cloud operation);
    /// the backoff is forgotten, since this is not a failure.
    RequeueAfter(Duration),
}

#[cfg(test)]
mod tests;
