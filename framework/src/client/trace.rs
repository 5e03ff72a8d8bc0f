//! A client span per API request, and W3C `traceparent` on the wire.
//!
//! Each request made inside a span (a reconcile) gets an INFO child span, exported at the
//! default `-v`; requests made outside any span (informer watches, lease renewals) get the same
//! span at DEBUG, so they do not flood the trace store with one-span traces. The span is named like
//! `get nodes` or `patch services/status`, with `otel.kind=client` and the attributes
//! `http.request.method`, `url.path`, `server.address`, `k8s.verb`, `k8s.resource`,
//! `k8s.subresource`, `k8s.namespace`, `k8s.name`, and once answered
//! `http.response.status_code` (`otel.status_code=ERROR` from 400 up, or on a transport error).
//! The span is a child of whatever span is current at the call (a reconcile, a watch), and
//! its context is injected as `traceparent`/`tracestate`, so an API server with tracing enabled
//! continues the same trace.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use opentelemetry::propagation::{Injector, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tower::{Layer, Service};
use tracing::Instrument;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::request_info::RequestInfo;

/// Wraps an API service so every request runs in its own client span and carries its context.
#[derive(Clone, Debug)]
pub struct ApiTraceLayer {
    host: String,
}

impl ApiTraceLayer {
    /// `host` (the API server's `host:port`) becomes `server.address`.
    pub fn new(host: impl Into<String>) -> Self {
        Self { host: host.into() }
    }
}

impl<S> Layer<S> for ApiTraceLayer {
    type Service = ApiTrace<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ApiTrace {
            inner,
            host: self.host.clone(),
        }
    }
}

/// The service made by [`ApiTraceLayer`].
#[derive(Clone, Debug)]
pub struct ApiTrace<S> {
    inner: S,
    host: String,
}

impl<S, B, RB> Service<Request<B>> for ApiTrace<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
    S::Error: std::fmt::Display,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let span = request_span(&request, &self.host);
        inject_trace_context(&span, request.headers_mut());
        let response = span.in_scope(|| self.inner.call(request));
        let recorder = span.clone();
        Box::pin(
            async move {
                let result = response.await;
                match &result {
                    Ok(response) => {
                        let status = response.status();
                        recorder.record("http.response.status_code", status.as_u16());
                        if status.is_client_error() || status.is_server_error() {
                            recorder.record("otel.status_code", "ERROR");
                        }
                    }
                    Err(e) => {
                        recorder.record("otel.status_code", "ERROR");
                        recorder.record("error.message", tracing::field::display(e));
                    }
                }
                result
            }
            .instrument(span),
        )
    }
}

fn request_span<B>(request: &Request<B>, host: &str) -> tracing::Span {
    let info = RequestInfo::parse(request.method(), request.uri());
    let path = request.uri().path();
    let name = match info.resource_path() {
        Some(resource) => format!("{} {resource}", info.verb),
        None => format!("{} {path}", info.verb),
    };
    // A request made outside any span (informer list/watch, lease renewal) would be a root
    // trace of its own every few seconds; those spans are DEBUG so they appear only from -v=1.
    macro_rules! api_span {
        ($level:expr) => {
            tracing::span!(
                $level,
                "kube.api",
                otel.name = %name,
                otel.kind = "client",
                otel.status_code = Empty,
                http.request.method = %request.method(),
                http.response.status_code = Empty,
                url.path = %path,
                server.address = %host,
                k8s.verb = %info.verb,
                k8s.resource = Empty,
                k8s.subresource = Empty,
                k8s.namespace = Empty,
                k8s.name = Empty,
                error.message = Empty,
            )
        };
    }
    let span = if tracing::Span::current().is_none() {
        api_span!(tracing::Level::DEBUG)
    } else {
        api_span!(tracing::Level::INFO)
    };
    if let Some(resource) = &info.resource {
        span.record("k8s.resource", resource.as_str());
    }
    if let Some(sub) = &info.subresource {
        span.record("k8s.subresource", sub.as_str());
    }
    if let Some(ns) = &info.namespace {
        span.record("k8s.namespace", ns.as_str());
    }
    if let Some(name) = &info.name {
        span.record("k8s.name", name.as_str());
    }
    span
}

/// Writes the span's W3C trace context into `headers`; writes nothing when no OpenTelemetry
/// layer is installed (the context is then invalid).
pub fn inject_trace_context(span: &tracing::Span, headers: &mut HeaderMap) {
    let cx = span.context();
    TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(headers));
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use opentelemetry::trace::TraceContextExt;
    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::options::{LogFormat, LoggingOptions};
    use crate::telemetry::{TelemetryOptions, build_dispatch};

    #[tokio::test]
    async fn traceparent_carries_the_callers_trace_and_the_client_span() {
        let logging = LoggingOptions {
            verbosity: 0,
            logging_format: LogFormat::Text,
        };
        let (dispatch, _guard) = build_dispatch(
            "t",
            &logging,
            &TelemetryOptions::default(),
            &|_| None,
            std::io::sink,
        )
        .unwrap();
        let _default = tracing::dispatcher::set_default(&dispatch);
        let svc = service_fn(|req: Request<()>| async move {
            Ok::<_, Infallible>(Response::new(req.headers().clone()))
        });
        let svc = ApiTraceLayer::new("h:1").layer(svc);
        let root = tracing::info_span!("reconcile");
        let root_cx = root.context().span().span_context().clone();
        let request = Request::get("/api/v1/nodes/n1").body(()).unwrap();
        let headers = svc
            .oneshot(request)
            .instrument(root.clone())
            .await
            .unwrap()
            .into_body();
        let traceparent = headers["traceparent"].to_str().unwrap().to_string();
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts[1], root_cx.trace_id().to_string(), "{traceparent}");
        assert_ne!(
            parts[2],
            root_cx.span_id().to_string(),
            "must name the client span"
        );
        assert_eq!(parts[3], "01", "sampled flag");
    }

    async fn headers_outside_any_span(rust_log: Option<&str>) -> HeaderMap {
        let logging = LoggingOptions {
            verbosity: 0,
            logging_format: LogFormat::Text,
        };
        let rust_log = rust_log.map(str::to_string);
        let env = move |name: &str| (name == "RUST_LOG").then(|| rust_log.clone()).flatten();
        let (dispatch, _guard) = build_dispatch(
            "t",
            &logging,
            &TelemetryOptions::default(),
            &env,
            std::io::sink,
        )
        .unwrap();
        let _default = tracing::dispatcher::set_default(&dispatch);
        let svc = service_fn(|req: Request<()>| async move {
            Ok::<_, Infallible>(Response::new(req.headers().clone()))
        });
        let request = Request::get("/api/v1/nodes?watch=true").body(()).unwrap();
        ApiTraceLayer::new("h:1")
            .layer(svc)
            .oneshot(request)
            .await
            .unwrap()
            .into_body()
    }

    #[tokio::test]
    async fn requests_outside_any_span_are_traced_only_at_debug() {
        assert!(
            !headers_outside_any_span(None)
                .await
                .contains_key("traceparent")
        );
        let debug = headers_outside_any_span(Some("debug")).await;
        let traceparent = debug["traceparent"].to_str().unwrap();
        assert!(traceparent.starts_with("00-"), "{traceparent}");
    }
}
