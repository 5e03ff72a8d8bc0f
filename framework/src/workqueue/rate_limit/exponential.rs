//! Per-key exponential backoff, client-go's `ItemExponentialFailureRateLimiter`.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use parking_lot::Mutex;

use super::RateLimiter;

/// Backs a repeatedly failing key off exponentially (base·2ⁿ, capped), independently of other keys.
#[derive(Debug)]
pub struct ItemExponential<K> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<K, u32>>,
}

impl<K> ItemExponential<K> {
    /// A limiter whose n-th consecutive failure (from 0) waits `base·2ⁿ`, never more than `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }
}

impl<K> Default for ItemExponential<K> {
    /// Upstream's controller default: 5 ms … 1000 s (the cap is reached at the 19th failure).
    fn default() -> Self {
        Self::new(Duration::from_millis(5), Duration::from_secs(1000))
    }
}

impl<K> RateLimiter<K> for ItemExponential<K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn when(&self, key: &K) -> Duration {
        let exp = {
            let mut failures = self.failures.lock();
            match failures.get_mut(key) {
                Some(n) => {
                    let exp = *n;
                    *n = n.saturating_add(1);
                    exp
                }
                None => {
                    failures.insert(key.clone(), 1);
                    0
                }
            }
        };
        // Computed in floating point like upstream, so huge exponents cap instead of overflowing.
        let backoff = self.base.as_nanos() as f64 * 2f64.powf(f64::from(exp));
        if !backoff.is_finite() || backoff >= self.max.as_nanos() as f64 {
            return self.max;
        }
        Duration::from_nanos(backoff as u64)
    }

    fn forget(&self, key: &K) {
        self.failures.lock().remove(key);
    }

    fn num_requeues(&self, key: &K) -> u32 {
        self.failures.lock().get(key).copied().unwrap_or(0)
    }
}
