//! The work queue that feeds every controller: client-go's queue, delaying queue and
//! rate-limiting queue in one type, with client-go's metrics.
//!
//! It owns the rules that make level-triggered reconciliation safe: a waiting key is queued only
//! once however often it is added; a key is never handed to two workers at once; a key added while
//! a worker holds it is handed out again after [`WorkQueue::done`]; keys come out in order of first
//! add. [`WorkQueue::add_after`] keeps the earliest ready time per key, and
//! [`WorkQueue::add_rate_limited`] asks a [`RateLimiter`] for the delay. Each controller owns a
//! named queue (its lane); lanes share retry budget by sharing a [`TokenBucket`].
//!
//! Every add opens a short `enqueue` span and the queue keeps its context with the key
//! ([`Cause`]); [`WorkQueue::get_with_cause`] hands it out, so the reconcile's root span links to
//! the adds it absorbed through deduplication (see [`cause`](Cause) for the rules).
//!
//! Differences from client-go, all deliberate:
//! - Delayed keys are promoted by whichever operation or timer first sees them due, not by a
//!   dedicated goroutine with a 1000-entry channel, so `add_after` never blocks and there is no
//!   10 s heartbeat.
//! - Both shutdowns drop delayed keys at once and stop the timer task (client-go's delaying loop
//!   notices a drain only on its next wake-up, up to 10 s later; its late adds are ignored).
//! - Rate-limiter delays that overflow the clock are parked ~30 years ahead instead of wrapping.

mod cause;
mod metrics;
mod queue;
pub mod rate_limit;
mod state;

pub use cause::{AddReason, Cause, MAX_LINKS};
pub use metrics::WorkQueueMetrics;
pub use queue::{QueueKey, WorkQueue, WorkQueueBuilder};
pub use rate_limit::{
    FastSlow, ItemExponential, MaxOf, RateLimiter, TokenBucket, WithMaxWait,
    default_controller_rate_limiter, default_controller_rate_limiter_with_bucket,
};

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;
