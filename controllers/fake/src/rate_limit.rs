//! The fake cloud's API quota: a token bucket over some or all methods that answers
//! [`CloudError::Retry`] (a cloud's HTTP 429 with `Retry-After`) once it is empty, so tests and
//! benchmarks see what a rate-limited cloud does to the controllers.
//!
//! A refused call is answered at once (no latency, no hold) and logged with its error, as a
//! cloud's front door refuses before any work is done. The delay in the answer is the time until
//! the bucket holds a token again; the clock is tokio's, so paused-clock tests are exact.

use std::collections::BTreeSet;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::Method;
use cloud_controllers::cloud::{CloudError, MAX_QPS, MIN_QPS, qps_in_range};

/// A cloud API quota: `qps` calls per second with bursts of `burst`, over `methods` (all when
/// empty).
///
/// ```
/// # use fake_cloud::{Method, RateLimit};
/// // 20 load-balancer calls per second, 20 at once; instance calls are not limited.
/// let quota = RateLimit::new(20.0, 20)
///     .methods([Method::EnsureLoadBalancer, Method::UpdateLoadBalancer]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimit {
    qps: f64,
    burst: u32,
    methods: BTreeSet<Method>,
}

/// Why a [`RateLimit`] was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RateLimitError {
    /// `qps` is not a number from [`MIN_QPS`] (one call per 1,000 s) to [`MAX_QPS`].
    #[error(
        "rateLimit.qps must be a number from {MIN_QPS} (one call per {} s) to {MAX_QPS} calls per second",
        1.0 / MIN_QPS
    )]
    Qps,
    /// `burst` is zero.
    #[error("rateLimit.burst must be at least 1")]
    Burst,
}

impl RateLimit {
    /// `qps` calls per second on average, at most `burst` at once, over every method.
    pub fn new(qps: f64, burst: u32) -> Self {
        Self {
            qps,
            burst,
            methods: BTreeSet::new(),
        }
    }

    /// Limits only these methods (the quota is still one bucket they share).
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.methods = methods.into_iter().collect();
        self
    }

    pub(super) fn validate(&self) -> Result<(), RateLimitError> {
        if !qps_in_range(self.qps) {
            return Err(RateLimitError::Qps);
        }
        if self.burst == 0 {
            return Err(RateLimitError::Burst);
        }
        Ok(())
    }

    fn covers(&self, method: Method) -> bool {
        method != Method::GetLoadBalancerName
            && (self.methods.is_empty() || self.methods.contains(&method))
    }
}

/// The bucket of one fake cloud; no limit until [`Quota::set`].
#[derive(Default)]
pub(super) struct Quota {
    bucket: Mutex<Option<Bucket>>,
}

struct Bucket {
    limit: RateLimit,
    tokens: f64,
    refilled: Instant,
}

impl Quota {
    /// Replaces the limit (`None` removes it); a new limit starts with a full bucket.
    pub(super) fn set(&self, limit: Option<RateLimit>) {
        *self.bucket.lock() = limit.map(|limit| Bucket {
            tokens: f64::from(limit.burst),
            refilled: Instant::now(),
            limit,
        });
    }

    /// Takes a token for a call of `method`, or says how long until there is one.
    pub(super) fn admit(&self, method: Method) -> Result<(), CloudError> {
        let mut guard = self.bucket.lock();
        let Some(bucket) = guard.as_mut().filter(|b| b.limit.covers(method)) else {
            return Ok(());
        };
        let now = Instant::now();
        let qps = bucket.limit.qps;
        let burst = f64::from(bucket.limit.burst);
        let elapsed = now.saturating_duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * qps).min(burst);
        bucket.refilled = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        // Round up to a whole millisecond, so the caller that waits `after` finds a token.
        // (rounded to the nanosecond first, so float noise does not add a millisecond).
        let wait_nanos = ((1.0 - bucket.tokens) / qps * 1e9).round() as u64;
        let after = Duration::from_millis(wait_nanos.div_ceil(1_000_000).max(1));
        Err(CloudError::Retry {
            message: format!(
                "fake cloud: rate limit exceeded ({qps} calls/s, burst {}) for {method}",
                bucket.limit.burst
            ),
            after,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_then_one_token_per_interval_with_exact_retry_after() {
        let quota = Quota::default();
        quota.set(Some(RateLimit::new(10.0, 2)));
        assert!(quota.admit(Method::UpdateLoadBalancer).is_ok());
        assert!(quota.admit(Method::InstanceMetadata).is_ok());
        let err = quota.admit(Method::UpdateLoadBalancer).unwrap_err();
        assert_eq!(err.retry_after(), Some(Duration::from_millis(100)));
        assert!(err.to_string().contains("rate limit exceeded"), "{err}");
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(quota.admit(Method::UpdateLoadBalancer).is_ok());
        assert!(quota.admit(Method::UpdateLoadBalancer).is_err());
        // Idle time refills up to the burst, not beyond.
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(quota.admit(Method::UpdateLoadBalancer).is_ok());
        assert!(quota.admit(Method::UpdateLoadBalancer).is_ok());
        assert!(quota.admit(Method::UpdateLoadBalancer).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn only_listed_methods_count_and_none_removes_the_limit() {
        let quota = Quota::default();
        quota.set(Some(
            RateLimit::new(1.0, 1).methods([Method::EnsureLoadBalancer]),
        ));
        for _ in 0..5 {
            assert!(quota.admit(Method::InstanceMetadata).is_ok());
        }
        assert!(quota.admit(Method::EnsureLoadBalancer).is_ok());
        assert!(quota.admit(Method::EnsureLoadBalancer).is_err());
        quota.set(None);
        assert!(quota.admit(Method::EnsureLoadBalancer).is_ok());
    }

    #[test]
    fn zero_rates_and_bursts_are_refused() {
        assert_eq!(RateLimit::new(0.0, 1).validate(), Err(RateLimitError::Qps));
        assert_eq!(
            RateLimit::new(f64::NAN, 1).validate(),
            Err(RateLimitError::Qps)
        );
        assert_eq!(
            RateLimit::new(1.0, 0).validate(),
            Err(RateLimitError::Burst)
        );
        // Rates so slow a refused call would wait for ages, or beyond any cloud.
        for qps in [1e-300, 0.0009, f64::INFINITY, -1.0, 1e6 + 1.0] {
            assert_eq!(
                RateLimit::new(qps, 1).validate(),
                Err(RateLimitError::Qps),
                "{qps}"
            );
        }
        for qps in [0.5, 0.001, 1e6] {
            assert_eq!(RateLimit::new(qps, 1).validate(), Ok(()), "{qps}");
        }
    }
}
