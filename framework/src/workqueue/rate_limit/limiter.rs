//! The [`RateLimiter`] contract every limiter here implements, and its forwarding through `Box`
//! and `Arc`.

use std::sync::Arc;
use std::time::Duration;

/// Decides retry delays so a failing key backs off instead of hot-looping (client-go `RateLimiter`).
pub trait RateLimiter<K>: Send + Sync + 'static {
    /// Records one more failure of `key` and returns how long it should wait before the retry.
    fn when(&self, key: &K) -> Duration;
    /// Clears the failure history of `key` after it succeeded, so its next failure starts afresh.
    fn forget(&self, key: &K);
    /// How many failures of `key` are currently recorded (the `attempt` a reconcile sees).
    fn num_requeues(&self, key: &K) -> u32;
}

/// A boxed or shared limiter is a limiter.
macro_rules! forward_rate_limiter {
    ($($ptr:ident),*) => {$(
        impl<K, L: RateLimiter<K> + ?Sized> RateLimiter<K> for $ptr<L> {
            fn when(&self, key: &K) -> Duration {
                (**self).when(key)
            }
            fn forget(&self, key: &K) {
                (**self).forget(key)
            }
            fn num_requeues(&self, key: &K) -> u32 {
                (**self).num_requeues(key)
            }
        }
    )*};
}
forward_rate_limiter!(Box, Arc);
