//! The layers every webhook route runs behind, outermost first: [`TraceLayer`] (one `webhook`
//! span per review), [`MetricsLayer`] (controller-runtime's webhook metrics, by the code
//! answered), [`GuardLayer`] (a panic or an error answers HTTP 500, a panic is counted, and the
//! process keeps serving; the server's `failurePolicy` then decides), [`DeadlineLayer`] (the
//! handler is dropped and 500 answered before the server's own `?timeout=` runs out, so the
//! answer is ours and in our metrics). [`standard`] stacks them; the panic guard is the
//! framework's one ([`crate::panic_guard`]), as the controllers' reconcile layers use it.

use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use prometheus_client::metrics::counter::Counter;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Layer, Service, ServiceBuilder};
use tracing::Instrument;
use tracing::field::Empty;

use super::endpoint::{WebhookRequest, WebhookResponse, text};
use super::metrics::{CodeLabels, WebhookLabel, WebhookMetrics};
use crate::options::GoDuration;
use crate::panic_guard::{catch, guard};

/// A webhook route: a handler behind [`standard`], ready to be mounted at its path.
pub type Route = BoxCloneSyncService<WebhookRequest, WebhookResponse, std::convert::Infallible>;

/// Puts `endpoint` (an [`Admission`](super::Admission) or [`Conversion`](super::Conversion))
/// behind the standard layers for webhook `name` served at `path`, with `timeout` as the
/// longest a review may take.
pub fn standard<S>(
    name: &str,
    path: &str,
    metrics: &WebhookMetrics,
    timeout: Duration,
    endpoint: S,
) -> Route
where
    S: Service<WebhookRequest, Response = WebhookResponse, Error = BoxError>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let service = ServiceBuilder::new()
        .layer(TraceLayer {
            name: name.to_string(),
        })
        .layer(MetricsLayer {
            path: path.to_string(),
            metrics: metrics.clone(),
        })
        .layer(GuardLayer {
            panics: metrics.panics.clone(),
        })
        .layer(DeadlineLayer { timeout })
        .service(endpoint);
    BoxCloneSyncService::new(service)
}

/// Runs each review in a root span `webhook` with `webhook.name`; the endpoint adds
/// `k8s.operation`, `object.ref` and `allowed`.
#[derive(Clone, Debug)]
pub struct TraceLayer {
    name: String,
}

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;
    fn layer(&self, inner: S) -> Trace<S> {
        Trace {
            inner,
            name: self.name.clone(),
        }
    }
}

/// See [`TraceLayer`].
#[derive(Clone, Debug)]
pub struct Trace<S> {
    inner: S,
    name: String,
}

impl<S> Service<WebhookRequest> for Trace<S>
where
    S: Service<WebhookRequest, Response = WebhookResponse>,
    S::Future: Send + 'static,
{
    type Response = WebhookResponse;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<WebhookResponse, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: WebhookRequest) -> Self::Future {
        let span = tracing::info_span!(
            parent: None,
            "webhook",
            webhook.name = %self.name,
            http.path = request.uri().path(),
            k8s.operation = Empty,
            object.ref = Empty,
            allowed = Empty,
            http.status_code = Empty,
        );
        let future = span.in_scope(|| self.inner.call(request));
        let recorded = span.clone();
        Box::pin(
            async move {
                let result = future.await;
                if let Ok(response) = &result {
                    recorded.record("http.status_code", response.status().as_u16());
                }
                result
            }
            .instrument(span),
        )
    }
}

/// Counts each review by the code answered, times it and counts it as in flight meanwhile.
#[derive(Clone, Debug)]
pub struct MetricsLayer {
    path: String,
    metrics: WebhookMetrics,
}

impl<S> Layer<S> for MetricsLayer {
    type Service = Measured<S>;
    fn layer(&self, inner: S) -> Measured<S> {
        Measured {
            inner,
            path: self.path.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

/// See [`MetricsLayer`].
#[derive(Clone, Debug)]
pub struct Measured<S> {
    inner: S,
    path: String,
    metrics: WebhookMetrics,
}

impl<S> Service<WebhookRequest> for Measured<S>
where
    S: Service<WebhookRequest, Response = WebhookResponse>,
    S::Future: Send + 'static,
{
    type Response = WebhookResponse;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<WebhookResponse, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: WebhookRequest) -> Self::Future {
        let label = WebhookLabel {
            webhook: self.path.clone(),
        };
        let in_flight = self.metrics.in_flight.get_or_create_owned(&label);
        let latency = self.metrics.latency.get_or_create_owned(&label);
        let requests = self.metrics.requests.clone();
        in_flight.inc();
        // Dropped with the future too, so a review the server gave up on leaves the gauge right.
        let done = scopeguard(move || {
            in_flight.dec();
        });
        let started = Instant::now();
        let future = self.inner.call(request);
        Box::pin(async move {
            let result = future.await;
            latency.observe(started.elapsed().as_secs_f64());
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "500".to_string(),
            };
            requests
                .get_or_create(&CodeLabels {
                    webhook: label.webhook,
                    code,
                })
                .inc();
            drop(done);
            result
        })
    }
}

/// Runs `f` when dropped.
fn scopeguard(f: impl FnOnce() + Send + 'static) -> impl Send {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

/// Answers HTTP 500 for a handler's panic (counted in `controller_runtime_webhook_panics_total`)
/// or error (a missed deadline among them); the handler is never polled again after a panic.
#[derive(Clone, Debug)]
pub struct GuardLayer {
    panics: Counter,
}

impl<S> Layer<S> for GuardLayer {
    type Service = Guarded<S>;
    fn layer(&self, inner: S) -> Guarded<S> {
        Guarded {
            inner,
            panics: self.panics.clone(),
        }
    }
}

/// See [`GuardLayer`].
#[derive(Clone, Debug)]
pub struct Guarded<S> {
    inner: S,
    panics: Counter,
}

impl<S> Service<WebhookRequest> for Guarded<S>
where
    S: Service<WebhookRequest, Response = WebhookResponse, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = WebhookResponse;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<'static, Result<WebhookResponse, std::convert::Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // A handler that is not ready is called anyway: its call answers the error.
        let _ = catch(|| self.inner.poll_ready(cx));
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: WebhookRequest) -> Self::Future {
        let panics = self.panics.clone();
        let future = catch(|| self.inner.call(request));
        Box::pin(async move {
            let outcome = match future {
                Ok(future) => guard(future).await,
                Err(panicked) => Err(panicked),
            };
            Ok(match outcome {
                Ok(Ok(response)) => response,
                Ok(Err(error)) => {
                    tracing::error!(%error, "webhook handler failed");
                    text(500, &format!("webhook handler failed: {error}"))
                }
                Err(panicked) => {
                    panics.inc();
                    tracing::error!(panic = %panicked.message, "webhook handler panicked");
                    text(500, "webhook handler panicked")
                }
            })
        })
    }
}

/// Gives each review at most the configured timeout and never more than nine tenths of the
/// `?timeout=` the server sends (its `timeoutSeconds`), then answers with an error.
#[derive(Clone, Copy, Debug)]
pub struct DeadlineLayer {
    timeout: Duration,
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;
    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            timeout: self.timeout,
        }
    }
}

/// See [`DeadlineLayer`].
#[derive(Clone, Debug)]
pub struct Deadline<S> {
    inner: S,
    timeout: Duration,
}

/// Why a review was cut short.
#[derive(Debug, thiserror::Error)]
#[error("no answer within {0:?}")]
pub struct TimedOut(pub Duration);

impl<S> Service<WebhookRequest> for Deadline<S>
where
    S: Service<WebhookRequest, Response = WebhookResponse, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = WebhookResponse;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<WebhookResponse, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: WebhookRequest) -> Self::Future {
        let limit = server_timeout(&request).map_or(self.timeout, |t| self.timeout.min(t * 9 / 10));
        let future = self.inner.call(request);
        Box::pin(async move {
            match tokio::time::timeout(limit, future).await {
                Ok(result) => result,
                Err(_) => Err(TimedOut(limit).into()),
            }
        })
    }
}

/// The `?timeout=` the server put on the request (`10s`), if any.
fn server_timeout(request: &WebhookRequest) -> Option<Duration> {
    request
        .uri()
        .query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("timeout="))
        .and_then(|value| value.parse::<GoDuration>().ok())
        .map(GoDuration::get)
}
