//! Delegation, metrics and spans of the instrumented provider, around the fake cloud.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::with_default;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use super::*;
use crate::cloud::fake::{
    Facets, FakeCloud, FakeInstance, FaultSpec, Method, default_load_balancer_name,
};

/// The fake cloud with a load balancer and InstancesV2 only: `GetLoadBalancer` asks to retry in
/// 5 s, `InstanceShutdown` fails, and `InstanceExists` of `gone` answers InstanceNotFound.
fn fake() -> FakeCloud {
    let cloud = FakeCloud::builder()
        .facets(Facets {
            load_balancer: true,
            instances_v2: true,
            ..Facets::none()
        })
        .instance(FakeInstance::new("n"))
        .instance(FakeInstance::new("n1"))
        .instance(FakeInstance::new("n2"))
        .lb_pool_cidr("10.0.0.0/29")
        .build()
        .expect("a valid fake cloud");
    cloud.fail(
        Method::GetLoadBalancer,
        FaultSpec::retry("busy", Duration::from_secs(5)),
    );
    cloud.fail(
        Method::InstanceShutdown,
        FaultSpec::other("api unreachable"),
    );
    cloud.fail(
        Method::InstanceExists,
        FaultSpec::instance_not_found().only_for("gone"),
    );
    cloud
}

fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

/// Every test that makes cloud spans runs under its own scoped subscriber: with a single
/// registered dispatcher, tracing-core computes a callsite's interest from whichever thread hits
/// it first, so a test without one could cache "never" for the span test running beside it.
fn scoped_subscriber() -> tracing::subscriber::DefaultGuard {
    tracing::subscriber::set_default(tracing_subscriber::registry())
}

fn wrapped(registry: &mut Registry) -> InstrumentedCloud {
    InstrumentedCloud::new(Arc::new(fake()), Some(CloudMetrics::new(registry)))
}

#[tokio::test]
async fn offers_exactly_the_inner_facets_and_delegates() {
    let _subscriber = scoped_subscriber();
    let cloud = wrapped(&mut Registry::default());
    assert!(cloud.load_balancer().is_some());
    assert!(cloud.instances_v2().is_some());
    assert!(cloud.instances().is_none());
    assert!(cloud.zones().is_none());
    assert!(cloud.clusters().is_none());
    assert!(cloud.routes().is_none());
    assert_eq!(cloud.provider_name(), "fake");
    assert!(cloud.has_cluster_id());

    let lb = cloud.load_balancer().unwrap();
    let nodes = vec![Arc::new(node("n1")), Arc::new(node("n2"))];
    let status = lb
        .ensure_load_balancer("c", &Service::default(), &nodes)
        .await
        .unwrap();
    let ip = status.ingress.unwrap()[0].ip.clone().unwrap();
    assert!(ip.starts_with("10.0.0."), "{ip}");
    assert_eq!(
        lb.get_load_balancer_name("c", &Service::default()),
        default_load_balancer_name(&Service::default())
    );
    assert_eq!(
        lb.get_load_balancer("c", &Service::default())
            .await
            .unwrap_err()
            .retry_after(),
        Some(Duration::from_secs(5))
    );
    let v2 = cloud.instances_v2().unwrap();
    let meta = v2.instance_metadata(&node("n1")).await.unwrap().unwrap();
    assert_eq!(meta.provider_id, "fake://n1");
    assert!(matches!(
        v2.instance_exists(&node("gone")).await,
        Err(CloudError::InstanceNotFound)
    ));
}

#[tokio::test]
async fn every_call_is_counted_by_outcome_and_timed() {
    let _subscriber = scoped_subscriber();
    let mut registry = Registry::default();
    let cloud = wrapped(&mut registry);
    let v2 = cloud.instances_v2().unwrap();
    v2.instance_exists(&node("n1")).await.unwrap();
    v2.instance_exists(&node("n2")).await.unwrap();
    let _ = v2.instance_exists(&node("gone")).await;
    let _ = v2.instance_shutdown(&node("n1")).await;
    let _ = cloud
        .load_balancer()
        .unwrap()
        .get_load_balancer("c", &Service::default())
        .await;

    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    for line in [
        r#"cloud_provider_requests_total{provider="fake",method="InstanceExists",outcome="success"} 2"#,
        r#"cloud_provider_requests_total{provider="fake",method="InstanceExists",outcome="not_found"} 1"#,
        r#"cloud_provider_requests_total{provider="fake",method="InstanceShutdown",outcome="error"} 1"#,
        r#"cloud_provider_requests_total{provider="fake",method="GetLoadBalancer",outcome="retry"} 1"#,
        r#"cloud_provider_request_duration_seconds_count{provider="fake",method="InstanceExists"} 3"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

/// A span's parent id and its fields (plus `name`).
type SpanRecord = (Option<u64>, BTreeMap<String, String>);

/// Records every span's fields and parent, by span id.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<BTreeMap<u64, SpanRecord>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        fields.insert("name".to_string(), attrs.metadata().name().to_string());
        attrs.record(&mut Fields(&mut fields));
        let parent = ctx
            .span(id)
            .and_then(|s| s.parent())
            .map(|p| p.id().into_u64());
        self.0.lock().insert(id.into_u64(), (parent, fields));
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some((_, fields)) = self.0.lock().get_mut(&id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
}

#[test]
fn each_call_is_a_client_span_under_the_current_span() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    with_default(subscriber, || {
        // Another test thread may have registered the span's callsite with no subscriber and
        // cached "not interested"; recompute with this one in place.
        tracing::callsite::rebuild_interest_cache();
        let cloud = InstrumentedCloud::new(Arc::new(fake()), None);
        runtime.block_on(
            async {
                let lb = cloud.load_balancer().unwrap();
                lb.ensure_load_balancer("c", &Service::default(), &[])
                    .await
                    .unwrap();
                let _ = cloud
                    .instances_v2()
                    .unwrap()
                    .instance_shutdown(&node("n"))
                    .await;
            }
            .instrument(tracing::info_span!("reconcile")),
        );
    });
    let spans = spans.0.lock();
    let find = |otel_name: &str| {
        spans
            .iter()
            .find(|(_, (_, f))| f.get("otel.name").map(String::as_str) == Some(otel_name))
            .map(|(id, (parent, f))| (*id, *parent, f.clone()))
            .unwrap_or_else(|| panic!("no span {otel_name} in {spans:?}"))
    };
    let (root_id, _, _) = spans
        .iter()
        .find(|(_, (_, f))| f["name"] == "reconcile")
        .map(|(id, (p, f))| (*id, *p, f.clone()))
        .unwrap();
    let (_, parent, ensure) = find("EnsureLoadBalancer");
    assert_eq!(parent, Some(root_id));
    assert_eq!(ensure["otel.kind"], "client");
    assert_eq!(ensure["cloud.provider"], "fake");
    assert_eq!(ensure["cloud.method"], "EnsureLoadBalancer");
    assert_eq!(ensure["cloud.outcome"], "success");
    assert!(!ensure.contains_key("otel.status_code"));
    let (_, _, shutdown) = find("InstanceShutdown");
    assert_eq!(shutdown["cloud.outcome"], "error");
    assert_eq!(shutdown["otel.status_code"], "ERROR");
    assert_eq!(shutdown["error.message"], "api unreachable");
}
