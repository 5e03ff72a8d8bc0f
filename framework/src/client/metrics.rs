//! client-go's REST client metrics, with the names and labels of component-base's
//! `metrics/prometheus/restclient`, so dashboards built for Go controller managers keep working:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `rest_client_requests_total` | counter | `code` (HTTP status, or `<error>`), `method` (HTTP method), `host` |
//! | `rest_client_request_duration_seconds` | histogram | `verb` (HTTP method), `host` |
//! | `rest_client_rate_limiter_duration_seconds` | histogram | `verb`, `host` |
//!
//! Durations use client-go's buckets (5 ms to 60 s). As in client-go, the request duration
//! includes the client-side rate-limiter wait. Unlike client-go, a request retried by kube's
//! built-in 429/503/504 retry is counted once, with its final status.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::time::Instant;
use tower::{Layer, Service};

use crate::metrics::{HistogramFamily, histograms, registered};

/// client-go's latency buckets for the REST client histograms.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// Labels of `rest_client_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestResultLabels {
    /// HTTP status code, or `<error>` when no response arrived.
    pub code: String,
    /// HTTP method.
    pub method: String,
    /// API server host:port.
    pub host: String,
}

/// Labels of the REST client latency histograms.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    /// HTTP method (client-go calls it `verb`).
    pub verb: String,
    /// API server host:port.
    pub host: String,
}

type LatencyFamily = HistogramFamily<LatencyLabels>;

/// The REST client metric families; clone it into every client so all clients of one process
/// report into the same series.
#[derive(Clone, Debug)]
pub struct ClientMetrics {
    requests: Family<RequestResultLabels, Counter>,
    duration: LatencyFamily,
    rate_limiter: LatencyFamily,
}

impl ClientMetrics {
    /// Registers the families in `registry` (unprefixed, to keep client-go's names).
    pub fn new(registry: &mut Registry) -> Self {
        Self {
            requests: registered(
                registry,
                "rest_client_requests",
                "Number of HTTP requests, partitioned by status code, method, and host",
                Family::default(),
            ),
            duration: registered(
                registry,
                "rest_client_request_duration_seconds",
                "Request latency in seconds. Broken down by verb, and host",
                histograms(&LATENCY_BUCKETS),
            ),
            rate_limiter: registered(
                registry,
                "rest_client_rate_limiter_duration_seconds",
                "Client side rate limiter latency in seconds. Broken down by verb, and host",
                histograms(&LATENCY_BUCKETS),
            ),
        }
    }

    /// Records one finished request.
    pub fn observe_request(&self, method: &str, host: &str, code: Option<u16>, took: Duration) {
        let code = code.map_or_else(|| "<error>".to_string(), |c| c.to_string());
        self.requests
            .get_or_create(&RequestResultLabels {
                code,
                method: method.to_string(),
                host: host.to_string(),
            })
            .inc();
        self.duration
            .get_or_create(&LatencyLabels {
                verb: method.to_string(),
                host: host.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// Records how long a request waited for a rate-limiter token.
    pub fn observe_rate_limiter_wait(&self, method: &str, host: &str, waited: Duration) {
        self.rate_limiter
            .get_or_create(&LatencyLabels {
                verb: method.to_string(),
                host: host.to_string(),
            })
            .observe(waited.as_secs_f64());
    }
}

/// Records [`ClientMetrics`] for every request that passes through.
#[derive(Clone, Debug)]
pub struct MetricsLayer {
    metrics: ClientMetrics,
    host: String,
}

impl MetricsLayer {
    /// `host` is the API server's `host:port`, the `host` label of every series.
    pub fn new(metrics: ClientMetrics, host: impl Into<String>) -> Self {
        Self {
            metrics,
            host: host.into(),
        }
    }
}

impl<S> Layer<S> for MetricsLayer {
    type Service = MetricsService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        MetricsService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service made by [`MetricsLayer`].
#[derive(Clone, Debug)]
pub struct MetricsService<S> {
    inner: S,
    layer: MetricsLayer,
}

impl<S, B, RB> Service<Request<B>> for MetricsService<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let method = request.method().as_str().to_string();
        let layer = self.layer.clone();
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = result.as_ref().ok().map(|r| r.status().as_u16());
            layer
                .metrics
                .observe_request(&method, &layer.host, code, started.elapsed());
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use prometheus_client::encoding::text::encode;
    use tower::{ServiceExt, service_fn};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn requests_are_counted_by_code_method_host_and_timed_by_verb_host() {
        let mut registry = Registry::default();
        let metrics = ClientMetrics::new(&mut registry);
        let svc = service_fn(|req: Request<()>| async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            let status = if req.uri().path().ends_with("missing") {
                404
            } else {
                200
            };
            Ok::<_, Infallible>(Response::builder().status(status).body(()).unwrap())
        });
        let mut svc = MetricsLayer::new(metrics, "10.0.0.1:6443").layer(svc);
        for path in [
            "/api/v1/nodes/a",
            "/api/v1/nodes/b",
            "/api/v1/nodes/missing",
        ] {
            let req = Request::get(path).body(()).unwrap();
            svc.ready().await.unwrap().call(req).await.unwrap();
        }
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"rest_client_requests_total{code="200",method="GET",host="10.0.0.1:6443"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"rest_client_requests_total{code="404",method="GET",host="10.0.0.1:6443"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"rest_client_request_duration_seconds_count{verb="GET",host="10.0.0.1:6443"} 3"#
            ),
            "{text}"
        );
        // 30 ms lands in the 25 ms < x <= 100 ms bucket.
        assert!(
            text.contains(r#"rest_client_request_duration_seconds_bucket{le="0.025",verb="GET",host="10.0.0.1:6443"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"rest_client_request_duration_seconds_bucket{le="0.1",verb="GET",host="10.0.0.1:6443"} 3"#),
            "{text}"
        );
    }

    #[tokio::test]
    async fn transport_errors_are_counted_as_error_code() {
        let mut registry = Registry::default();
        let metrics = ClientMetrics::new(&mut registry);
        let svc = service_fn(|_req: Request<()>| async { Err::<Response<()>, _>("refused") });
        let svc = MetricsLayer::new(metrics, "h:1").layer(svc);
        assert!(
            svc.oneshot(
                Request::post("/api/v1/namespaces/d/events")
                    .body(())
                    .unwrap()
            )
            .await
            .is_err()
        );
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"rest_client_requests_total{code="<error>",method="POST",host="h:1"} 1"#
            ),
            "{text}"
        );
    }
}
