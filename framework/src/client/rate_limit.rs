//! Client-side QPS/burst limit, as client-go's `flowcontrol.NewTokenBucketRateLimiter`.
//!
//! The bucket starts full (`burst` tokens) and refills at `qps` tokens per second. Each request
//! reserves one token at once, letting the balance go negative, and waits until its reservation
//! is covered: waiters are served in arrival order and never starve, as with
//! `golang.org/x/time/rate`'s `Wait`. A request dropped while waiting returns its token.
//!
//! Differences from client-go, on purpose:
//! - long-running requests (watches, exec/attach/port-forward/proxy) take no token: a relist
//!   storm after an API server restart must not delay reconcile writes for seconds;
//! - the limit applies once per call: kube's built-in retry of 429/503/504 runs below this
//!   layer, so retried attempts are not throttled again (the server's `Retry-After` already
//!   paces them).
//!
//! Time is Tokio time, so tests drive it with a paused clock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Request;
use parking_lot::Mutex;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

use super::metrics::ClientMetrics;
use super::request_info::RequestInfo;

/// A shared token bucket; clones draw from the same tokens.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Arc<Mutex<BucketState>>,
}

#[derive(Debug)]
struct BucketState {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// `qps` tokens per second, at most `burst` stored; both must be positive.
    pub fn new(qps: f32, burst: u32) -> Self {
        Self {
            qps: f64::from(qps),
            burst: f64::from(burst),
            state: Arc::new(Mutex::new(BucketState {
                tokens: f64::from(burst),
                last: Instant::now(),
            })),
        }
    }

    /// Waits until a token is available and takes it.
    pub async fn acquire(&self) {
        let ready_at = self.reserve();
        if ready_at <= Instant::now() {
            return;
        }
        let mut reservation = Reservation {
            bucket: self,
            done: false,
        };
        tokio::time::sleep_until(ready_at).await;
        reservation.done = true;
    }

    /// Reserves a token now and returns when it may be used.
    fn reserve(&self) -> Instant {
        let now = Instant::now();
        let mut state = self.state.lock();
        let elapsed = now.saturating_duration_since(state.last).as_secs_f64();
        state.tokens = (state.tokens + elapsed * self.qps).min(self.burst);
        state.last = now;
        state.tokens -= 1.0;
        if state.tokens >= 0.0 {
            now
        } else {
            now + Duration::from_secs_f64(-state.tokens / self.qps)
        }
    }

    fn give_back(&self) {
        let mut state = self.state.lock();
        state.tokens = (state.tokens + 1.0).min(self.burst);
    }
}

/// Returns the token if the waiting request is dropped before its turn.
struct Reservation<'a> {
    bucket: &'a TokenBucket,
    done: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.bucket.give_back();
        }
    }
}

/// Puts a [`TokenBucket`] in front of a cloneable API service.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    bucket: TokenBucket,
    metrics: Option<(ClientMetrics, String)>,
}

impl RateLimitLayer {
    /// Limits with `bucket`; when `metrics` is given, the wait is observed as
    /// `rest_client_rate_limiter_duration_seconds{verb,host}` under `host`.
    pub fn new(bucket: TokenBucket, metrics: Option<(ClientMetrics, String)>) -> Self {
        Self { bucket, metrics }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

/// The service made by [`RateLimitLayer`]. The token is awaited inside the response future, not
/// in `poll_ready`, because whether a request pays depends on the request itself; the inner
/// service is cloned per call for that reason (put a `Buffer` under it).
#[derive(Clone, Debug)]
pub struct RateLimit<S> {
    inner: S,
    bucket: TokenBucket,
    metrics: Option<(ClientMetrics, String)>,
}

impl<S, B> Service<Request<B>> for RateLimit<S>
where
    S: Service<Request<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let exempt = RequestInfo::parse(request.method(), request.uri()).is_long_running();
        let inner = self.inner.clone();
        let bucket = self.bucket.clone();
        let metrics = self.metrics.clone();
        let method = request.method().as_str().to_string();
        Box::pin(async move {
            if !exempt {
                let started = Instant::now();
                bucket.acquire().await;
                if let Some((metrics, host)) = &metrics {
                    metrics.observe_rate_limiter_wait(&method, host, started.elapsed());
                }
            }
            inner.oneshot(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::service_fn;

    use super::*;

    async fn times_of(bucket: &TokenBucket, n: usize) -> Vec<Duration> {
        let start = Instant::now();
        let mut out = Vec::new();
        for _ in 0..n {
            bucket.acquire().await;
            out.push(start.elapsed());
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn burst_is_free_then_requests_are_spaced_at_qps() {
        let bucket = TokenBucket::new(10.0, 3);
        let t = times_of(&bucket, 6).await;
        assert_eq!(&t[..3], &[Duration::ZERO; 3]);
        assert_eq!(t[3], Duration::from_millis(100));
        assert_eq!(t[4], Duration::from_millis(200));
        assert_eq!(t[5], Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn idle_time_refills_up_to_burst_only() {
        let bucket = TokenBucket::new(2.0, 2);
        times_of(&bucket, 2).await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        let t = times_of(&bucket, 3).await;
        assert_eq!(
            t,
            vec![Duration::ZERO, Duration::ZERO, Duration::from_millis(500)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_waiters_are_served_in_reservation_order() {
        let bucket = TokenBucket::new(1.0, 1);
        bucket.acquire().await;
        let start = Instant::now();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let b = bucket.clone();
                tokio::spawn(async move {
                    b.acquire().await;
                    start.elapsed()
                })
            })
            .collect();
        let mut done = Vec::new();
        for w in waiters {
            done.push(w.await.unwrap());
        }
        assert_eq!(
            done,
            vec![
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(3)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_waiter_returns_its_token() {
        let bucket = TokenBucket::new(1.0, 1);
        bucket.acquire().await;
        // Reserve and give up before the token is due.
        let _ = tokio::time::timeout(Duration::from_millis(10), bucket.acquire()).await;
        let start = Instant::now();
        bucket.acquire().await;
        assert_eq!(start.elapsed(), Duration::from_millis(990));
    }

    #[tokio::test(start_paused = true)]
    async fn watches_skip_the_bucket_and_other_requests_wait() {
        let svc = service_fn(|_req: Request<()>| async { Ok::<_, Infallible>(Instant::now()) });
        let mut limited = RateLimitLayer::new(TokenBucket::new(1.0, 1), None).layer(svc);
        let start = Instant::now();
        let req = |uri: &str| Request::get(uri).body(()).unwrap();

        let first = limited
            .ready()
            .await
            .unwrap()
            .call(req("/api/v1/nodes"))
            .await
            .unwrap();
        assert_eq!(first - start, Duration::ZERO);
        for _ in 0..5 {
            let watch = limited
                .ready()
                .await
                .unwrap()
                .call(req("/api/v1/nodes?watch=true&resourceVersion=1"))
                .await
                .unwrap();
            assert_eq!(watch - start, Duration::ZERO, "a watch waited for a token");
        }
        let second = limited
            .ready()
            .await
            .unwrap()
            .call(req("/api/v1/nodes/n1"))
            .await
            .unwrap();
        assert_eq!(second - start, Duration::from_secs(1));
    }
}
