//! Rate limiters as values: they decide how long a failed key waits before it is retried.
//!
//! The set and the numbers are client-go's (`util/workqueue/default_rate_limiters.go`):
//! [`ItemExponential`] per-key backoff, a shared [`TokenBucket`], and the combinators [`MaxOf`],
//! [`FastSlow`] and [`WithMaxWait`]. [`default_controller_rate_limiter`] is upstream's
//! `DefaultControllerRateLimiter`; [`default_controller_rate_limiter_with_bucket`] builds the same
//! around a caller's bucket so several lanes can share one process-wide retry budget.

mod combinators;
mod exponential;
mod limiter;
mod token_bucket;

pub use combinators::{FastSlow, MaxOf, WithMaxWait};
pub use exponential::ItemExponential;
pub use limiter::RateLimiter;
pub use token_bucket::TokenBucket;

/// Upstream's default for controllers: per-key exponential 5 ms … 1000 s, capped overall by a
/// 10 qps / burst 100 bucket owned by this limiter alone.
pub fn default_controller_rate_limiter<K>() -> MaxOf<K>
where
    K: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    default_controller_rate_limiter_with_bucket(TokenBucket::new(10.0, 100))
}

/// The default controller limiter around a caller-supplied bucket: pass clones of one
/// [`TokenBucket`] to several lanes to cap the process-wide retry rate.
pub fn default_controller_rate_limiter_with_bucket<K>(bucket: TokenBucket) -> MaxOf<K>
where
    K: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    MaxOf::new(vec![Box::new(ItemExponential::default()), Box::new(bucket)])
}
