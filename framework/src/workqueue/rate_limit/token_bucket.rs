//! An overall token bucket, client-go's `BucketRateLimiter` over golang.org/x/time/rate.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::RateLimiter;

/// Caps the total retry rate across every key (and, when cloned, across every lane sharing it).
///
/// `when` makes a reservation like x/time/rate's `Reserve().Delay()`: reservations accumulate, so
/// the 101st immediate retry against a 10 qps / burst 100 bucket waits 100 ms, the 102nd 200 ms.
/// Time is read from tokio's clock so paused-time tests are deterministic. Clones share one bucket.
///
/// Edge cases follow x/time/rate: an infinite `qps` never delays; `qps <= 0` hands out the burst
/// once and then never again; a zero burst never admits anything. "Never" is [`Duration::MAX`],
/// which the queue parks in the far future.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: u32,
    state: Arc<Mutex<Bucket>>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Option<Instant>,
    /// Remaining one-shot allowance when `qps <= 0` (x/time/rate's `limit == 0` case).
    allowance: u32,
}

impl TokenBucket {
    /// A bucket refilled at `qps` tokens per second holding at most `burst`, initially full.
    pub fn new(qps: f64, burst: u32) -> Self {
        Self {
            qps,
            burst,
            state: Arc::new(Mutex::new(Bucket {
                tokens: f64::from(burst),
                last: None,
                allowance: burst,
            })),
        }
    }

    /// Reserves one token and returns how long its holder must wait.
    fn reserve(&self) -> Duration {
        if self.qps.is_infinite() && self.qps > 0.0 {
            return Duration::ZERO;
        }
        let mut bucket = self.state.lock();
        if self.qps <= 0.0 || self.qps.is_nan() {
            if bucket.allowance >= 1 {
                bucket.allowance -= 1;
                return Duration::ZERO;
            }
            return Duration::MAX;
        }
        if self.burst == 0 {
            return Duration::MAX;
        }
        let now = Instant::now();
        let elapsed = bucket
            .last
            .map_or(Duration::ZERO, |last| now.saturating_duration_since(last));
        let tokens =
            (bucket.tokens + elapsed.as_secs_f64() * self.qps).min(f64::from(self.burst)) - 1.0;
        bucket.tokens = tokens;
        bucket.last = Some(now);
        if tokens >= 0.0 {
            return Duration::ZERO;
        }
        // Truncated to whole nanoseconds, as Go's durationFromTokens does.
        Duration::from_nanos((1e9 * -tokens / self.qps) as u64)
    }
}

impl<K> RateLimiter<K> for TokenBucket {
    fn when(&self, _key: &K) -> Duration {
        self.reserve()
    }

    fn forget(&self, _key: &K) {}

    fn num_requeues(&self, _key: &K) -> u32 {
        0
    }
}
