//! Limiters built from other limiters: `MaxOf`, `FastSlow`, `WithMaxWait` (client-go semantics).

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use parking_lot::Mutex;

use super::RateLimiter;

/// Applies several limiters at once and obeys the strictest, so a key is held back by both its
/// own backoff and the shared bucket (client-go `MaxOfRateLimiter`).
pub struct MaxOf<K> {
    limiters: Vec<Box<dyn RateLimiter<K>>>,
}

impl<K> MaxOf<K> {
    /// Combines `limiters`; each one's `when` is called on every failure (each consumes/counts).
    pub fn new(limiters: Vec<Box<dyn RateLimiter<K>>>) -> Self {
        Self { limiters }
    }
}

impl<K> std::fmt::Debug for MaxOf<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxOf")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<K: 'static> RateLimiter<K> for MaxOf<K> {
    fn when(&self, key: &K) -> Duration {
        self.limiters
            .iter()
            .map(|l| l.when(key))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    fn forget(&self, key: &K) {
        self.limiters.iter().for_each(|l| l.forget(key));
    }

    fn num_requeues(&self, key: &K) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(key))
            .max()
            .unwrap_or(0)
    }
}

/// Retries quickly a few times, then slowly, for failures expected to clear soon or not at all
/// (client-go `ItemFastSlowRateLimiter`).
#[derive(Debug)]
pub struct FastSlow<K> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
    failures: Mutex<HashMap<K, u32>>,
}

impl<K> FastSlow<K> {
    /// The first `max_fast_attempts` failures of a key wait `fast`, later ones `slow`.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        Self {
            fast,
            slow,
            max_fast_attempts,
            failures: Mutex::new(HashMap::new()),
        }
    }
}

impl<K> RateLimiter<K> for FastSlow<K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn when(&self, key: &K) -> Duration {
        let mut failures = self.failures.lock();
        let n = failures.entry(key.clone()).or_insert(0);
        *n = n.saturating_add(1);
        if *n <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, key: &K) {
        self.failures.lock().remove(key);
    }

    fn num_requeues(&self, key: &K) -> u32 {
        self.failures.lock().get(key).copied().unwrap_or(0)
    }
}

/// Caps another limiter's delay so no key ever waits longer than `max` (client-go
/// `WithMaxWaitRateLimiter`).
#[derive(Debug)]
pub struct WithMaxWait<L> {
    inner: L,
    max: Duration,
}

impl<L> WithMaxWait<L> {
    /// Wraps `inner`, clamping each delay it returns to `max`.
    pub fn new(inner: L, max: Duration) -> Self {
        Self { inner, max }
    }
}

impl<K, L: RateLimiter<K>> RateLimiter<K> for WithMaxWait<L> {
    fn when(&self, key: &K) -> Duration {
        self.inner.when(key).min(self.max)
    }

    fn forget(&self, key: &K) {
        self.inner.forget(key)
    }

    fn num_requeues(&self, key: &K) -> u32 {
        self.inner.num_requeues(key)
    }
}
