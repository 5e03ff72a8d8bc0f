//! Layer tests in isolation: the metric names controller-runtime dashboards expect, the
//! active-workers gauge for dropped reconciles, and the `reconcile` span's fields.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tower::{BoxError, Layer, Service, ServiceExt, service_fn};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};

use super::*;
use crate::controller::{Action, Request};

fn request(key: &'static str, attempt: u32) -> Request<&'static str> {
    Request {
        key,
        controller: Arc::from("c"),
        attempt,
        cause: Default::default(),
    }
}

/// Answers by key: `done`, `requeue`, anything else fails.
fn by_key(req: Request<&'static str>) -> futures::future::Ready<Result<Action, BoxError>> {
    futures::future::ready(match req.key {
        "done" => Ok(Action::Done),
        "requeue" => Ok(Action::RequeueAfter(Duration::from_secs(1))),
        _ => Err("boom".into()),
    })
}

fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
    text
}

#[tokio::test]
async fn metrics_use_controller_runtime_names_and_results() {
    let mut registry = Registry::default();
    let metrics = ControllerMetrics::new(&mut registry);
    let mut svc = MetricsLayer::new("c", &metrics).layer(service_fn(by_key));
    for key in ["done", "done", "requeue", "fail"] {
        let _ = svc
            .ready()
            .await
            .expect("ready")
            .call(request(key, 0))
            .await;
    }
    let text = encode(&registry);
    for line in [
        "controller_runtime_reconcile_total{controller=\"c\",result=\"success\"} 2",
        "controller_runtime_reconcile_total{controller=\"c\",result=\"requeue_after\"} 1",
        "controller_runtime_reconcile_total{controller=\"c\",result=\"error\"} 1",
        "controller_runtime_reconcile_errors_total{controller=\"c\"} 1",
        "controller_runtime_reconcile_panics_total{controller=\"c\"} 0",
        "controller_runtime_reconcile_time_seconds_count{controller=\"c\"} 4",
        "controller_runtime_reconcile_time_seconds_bucket{le=\"60.0\",controller=\"c\"} 4",
        "controller_runtime_active_workers{controller=\"c\"} 0",
        "# TYPE controller_runtime_reconcile counter",
        "# TYPE controller_runtime_reconcile_time_seconds histogram",
        "# TYPE controller_runtime_active_workers gauge",
    ] {
        assert!(text.contains(line), "missing `{line}` in\n{text}");
    }
}

#[tokio::test]
async fn active_workers_counts_in_flight_and_dropped_reconciles() {
    let mut registry = Registry::default();
    let metrics = ControllerMetrics::new(&mut registry);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let rx = Arc::new(Mutex::new(Some(rx)));
    let mut svc =
        MetricsLayer::new("c", &metrics).layer(service_fn(move |_: Request<&'static str>| {
            let rx = rx.lock().take();
            async move {
                if let Some(rx) = rx {
                    let _ = rx.await;
                }
                Ok::<_, BoxError>(Action::Done)
            }
        }));
    let mut pending = Box::pin(svc.call(request("a", 0)));
    assert!((&mut pending).now_or_never().is_none());
    assert!(encode(&registry).contains("controller_runtime_active_workers{controller=\"c\"} 1"));
    drop(pending); // e.g. cancelled by a timeout layer outside
    drop(tx);
    assert!(encode(&registry).contains("controller_runtime_active_workers{controller=\"c\"} 0"));
}

#[tokio::test]
async fn catch_panic_turns_panics_into_panicked_errors() {
    let mut svc = CatchPanicLayer::new().layer(service_fn(|req: Request<&'static str>| {
        if req.key == "sync" {
            panic!("in call");
        }
        async move {
            if req.key == "async" {
                panic!("in future {}", 42);
            }
            Ok::<_, BoxError>(Action::Done)
        }
    }));
    for (key, message) in [("sync", "in call"), ("async", "in future 42")] {
        let err = svc.call(request(key, 0)).await.expect_err("panicked");
        let panicked = err
            .downcast_ref::<catch_panic::Panicked>()
            .expect("Panicked");
        assert_eq!(panicked.message, message);
    }
    assert_eq!(svc.call(request("fine", 0)).await.ok(), Some(Action::Done));
}

type Spans = Arc<Mutex<HashMap<u64, (String, BTreeMap<String, String>)>>>;

/// Records every span's name and fields, including those recorded after creation.
struct Capture(Spans);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name().to_owned();
        self.0.lock().insert(id.into_u64(), (name, fields));
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some((_, fields)) = self.0.lock().get_mut(&id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
}

#[tokio::test]
async fn trace_opens_a_reconcile_span_and_records_the_outcome() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(Capture(spans.clone()));
    let _guard = tracing::subscriber::set_default(subscriber);
    // Callsites first seen by a test thread without a subscriber cached `never`.
    tracing::callsite::rebuild_interest_cache();
    let mut svc = TraceLayer::new().layer(service_fn(by_key));
    let _ = svc.call(request("ns/fail", 3)).await;
    let _ = svc.call(request("requeue", 0)).await;
    let spans = spans.lock();
    let mut seen: Vec<_> = spans.values().cloned().collect();
    seen.sort_by(|a, b| a.1.get("object.ref").cmp(&b.1.get("object.ref")));
    let expect = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    assert_eq!(
        seen,
        [
            (
                "reconcile".to_owned(),
                expect(&[
                    ("controller", "c"),
                    ("object.ref", "ns/fail"),
                    ("reason", "add"),
                    ("attempt", "3"),
                    ("queue.adds", "0"),
                    ("outcome", "error"),
                    ("error", "boom"),
                ])
            ),
            (
                "reconcile".to_owned(),
                expect(&[
                    ("controller", "c"),
                    ("object.ref", "requeue"),
                    ("reason", "add"),
                    ("attempt", "0"),
                    ("queue.adds", "0"),
                    ("outcome", "requeue_after"),
                    ("requeue_after", "1s"),
                ])
            ),
        ]
    );
}
