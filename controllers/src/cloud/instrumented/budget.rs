//! The cloud call budget, a tower layer every call of an [`super::InstrumentedCloud`] passes:
//! a process-wide rate limit and concurrency limit (`--cloud-api-qps`, `--cloud-api-burst`,
//! `--cloud-api-max-in-flight`, off by default as upstream), and with `--cloud-api-pause-on-retry`
//! (on by default; upstream has none) a pause of one method for every caller once the cloud
//! answers it with `Retry { after }` (a 429 with `Retry-After`), after which its callers take
//! turns ([`pacer`]).
//!
//! Upstream has no budget: each controller calls the cloud as fast as its workers go, and a cloud
//! quota shared by all of them is found out one 429 at a time, per key. A call waits, in order:
//! for its method's turn, for an in-flight slot, for a fresh turn if the cloud refused the method
//! meanwhile, for a rate token; then it runs. Waiting is on tokio's clock (paused-clock tests are
//! exact) and is measured in `cloud_provider_budget_wait_seconds` (every call, zero without
//! limits); pauses are the `retry` outcomes of `cloud_provider_requests_total`. A call cancelled
//! while it waits gives its slot back; a rate token it had reserved is spent, as with a Go
//! `rate.Limiter` reservation dropped late.
//!
//! The pause is per method, not per key: a quota is the account's, so the next caller of the
//! same method would get the same 429. The caller that got the answer still returns it, so its
//! key is requeued after `after` as before; callers already in flight are not recalled.
//!
//! [`pacer`]: super::pacer

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tower::{Layer, Service};

use super::metrics::CloudMetrics;
use super::pacer::RetryPacer;
use crate::cloud::CloudError;

/// The future of one cloud call on its way through the stack.
pub type CloudFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, CloudError>> + Send + 'a>>;

/// One cloud call as the tower stack sees it: the upstream method name and the call to make.
pub struct CloudRequest<'a, T> {
    /// Upstream Go method name, e.g. `UpdateLoadBalancer`.
    pub method: &'static str,
    /// The provider call; the innermost service awaits it.
    pub call: CloudFuture<'a, T>,
}

/// The innermost service: makes the call.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallProvider;

impl<'a, T> Service<CloudRequest<'a, T>> for CallProvider {
    type Response = T;
    type Error = CloudError;
    type Future = CloudFuture<'a, T>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), CloudError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: CloudRequest<'a, T>) -> Self::Future {
        req.call
    }
}

/// The slowest call rate a budget or quota takes: one call per 1,000 s. Slower rates are typos
/// (`1e-300` made the fake cloud answer "retry after 18,446,744,073 s", and a budget panic).
pub const MIN_QPS: f64 = 0.001;
/// The fastest call rate a budget or quota takes: a million calls per second.
pub const MAX_QPS: f64 = 1e6;

/// Whether `qps` is a rate a budget or quota takes: finite and from [`MIN_QPS`] to [`MAX_QPS`].
pub fn qps_in_range(qps: f64) -> bool {
    (MIN_QPS..=MAX_QPS).contains(&qps)
}

/// The budget's settings; the default spends nothing and waits for nothing (upstream).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BudgetOptions {
    /// Cloud calls per second, all methods together; 0 is unlimited. A rate outside
    /// [`MIN_QPS`]..=[`MAX_QPS`] is taken as the nearer bound (the flag refuses it).
    pub qps: f64,
    /// Calls at once above `qps` (the bucket size); 0 means `qps` rounded up.
    pub burst: u32,
    /// Cloud calls in flight at once; 0 is unlimited.
    pub max_in_flight: usize,
    /// Pause a method for every caller once the cloud answers it with `Retry { after }`, then
    /// let its callers take turns. (`--cloud-api-pause-on-retry` defaults to on; this type's
    /// `Default` is the upstream budget, nothing at all.)
    pub pause_on_retry: bool,
}

impl BudgetOptions {
    fn is_unlimited(&self) -> bool {
        self.qps <= 0.0 && self.max_in_flight == 0 && !self.pause_on_retry
    }
}

/// The shared budget (a [`Layer`]); clones share one state, so one budget per process.
#[derive(Clone)]
pub struct CloudBudget {
    state: Option<Arc<State>>,
}

struct State {
    bucket: Option<Mutex<Bucket>>,
    in_flight: Option<Semaphore>,
    pause_on_retry: bool,
    /// Per method, created on its first call when pausing is on.
    pacers: Mutex<HashMap<&'static str, Arc<RetryPacer>>>,
    metrics: Option<(CloudMetrics, String)>,
}

/// A token bucket that lends: a call takes a token now and waits until the bucket would have had
/// it, so waiters are served in order.
struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    refilled: Instant,
}

impl Bucket {
    fn reserve(&mut self) -> Duration {
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.refilled = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

impl std::fmt::Debug for CloudBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudBudget")
            .field("active", &self.state.is_some())
            .finish_non_exhaustive()
    }
}

impl CloudBudget {
    /// No budget: calls go straight through, nothing is measured.
    pub fn unlimited() -> Self {
        Self { state: None }
    }

    /// The budget `options` describe; waiting is measured in `metrics` (labelled `provider`).
    /// Without limits the calls only count (a zero wait each), so the metric has a series.
    pub fn new(options: &BudgetOptions, metrics: Option<(CloudMetrics, String)>) -> Self {
        if options.is_unlimited() && metrics.is_none() {
            return Self::unlimited();
        }
        let bucket = (options.qps > 0.0).then(|| {
            let qps = options.qps.clamp(MIN_QPS, MAX_QPS);
            let burst = match options.burst {
                0 => qps.ceil().max(1.0),
                b => f64::from(b),
            };
            Mutex::new(Bucket {
                qps,
                burst,
                tokens: burst,
                refilled: Instant::now(),
            })
        });
        let in_flight = (options.max_in_flight > 0).then(|| Semaphore::new(options.max_in_flight));
        Self {
            state: Some(Arc::new(State {
                bucket,
                in_flight,
                pause_on_retry: options.pause_on_retry,
                pacers: Mutex::new(HashMap::new()),
                metrics,
            })),
        }
    }
}

impl State {
    /// The turns of `method`'s callers, when pausing is on.
    fn pacer(&self, method: &'static str) -> Option<Arc<RetryPacer>> {
        self.pause_on_retry
            .then(|| self.pacers.lock().entry(method).or_default().clone())
    }
}

/// Tells the method's pacer what the cloud answered.
fn after_call<T>(pacer: &RetryPacer, method: &'static str, result: &Result<T, CloudError>) {
    match result.as_ref().map_err(CloudError::retry_after) {
        Ok(_) => pacer.accepted(),
        Err(Some(after)) => {
            pacer.refused(after);
            tracing::info!(
                cloud.method = method,
                pause = ?after,
                "cloud asked to retry later: pausing this method for every caller"
            );
        }
        Err(None) => {}
    }
}

impl<S> Layer<S> for CloudBudget {
    type Service = Budgeted<S>;

    fn layer(&self, inner: S) -> Budgeted<S> {
        Budgeted {
            budget: self.clone(),
            inner,
        }
    }
}

/// A service whose calls spend the [`CloudBudget`] first.
#[derive(Clone)]
pub struct Budgeted<S> {
    budget: CloudBudget,
    inner: S,
}

impl<'a, S, T> Service<CloudRequest<'a, T>> for Budgeted<S>
where
    S: Service<CloudRequest<'a, T>, Response = T, Error = CloudError> + Clone + Send + 'a,
    S::Future: Send + 'a,
    T: Send + 'a,
{
    type Response = T;
    type Error = CloudError;
    type Future = CloudFuture<'a, T>;

    /// Ready when the inner service is: a call waits for the budget in its own future, so a
    /// waiting call holds back no other.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), CloudError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: CloudRequest<'a, T>) -> Self::Future {
        let method = req.method;
        // Futures are lazy: nothing reaches the cloud until this is polled, after the wait.
        let call = self.inner.call(req);
        let Some(state) = self.budget.state.clone() else {
            return Box::pin(call);
        };
        Box::pin(spend(state, method, call))
    }
}

/// Waits for the budget, makes the call, and pauses its method if the cloud asks to.
async fn spend<F, T>(state: Arc<State>, method: &'static str, call: F) -> Result<T, CloudError>
where
    F: Future<Output = Result<T, CloudError>>,
{
    let started = Instant::now();
    let pacer = state.pacer(method);
    let seen = match &pacer {
        Some(p) => Some(p.wait().await),
        None => None,
    };
    let _slot = match &state.in_flight {
        // The semaphore is never closed: acquiring cannot fail.
        Some(slots) => slots.acquire().await.ok(),
        None => None,
    };
    if let (Some(p), Some(seen)) = (&pacer, seen) {
        p.wait_if_refused_since(seen).await;
    }
    if let Some(bucket) = &state.bucket {
        let wait = bucket.lock().reserve();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
    let waited = started.elapsed();
    if let Some((metrics, provider)) = &state.metrics {
        metrics.record_budget_wait(provider, method, waited);
    }
    if !waited.is_zero() {
        tracing::debug!(
            cloud.method = method,
            ?waited,
            "waited for the cloud call budget"
        );
    }
    let result = call.await;
    if let Some(p) = &pacer {
        after_call(p, method, &result);
    }
    result
}
