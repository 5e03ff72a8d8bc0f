//! Each cloud call through `InstrumentedCloud` is a client span under the caller's span, with the
//! outcome and, on failure, the error. Its own test binary with one test: tracing-core caches a
//! callsite's interest process-wide, and a test beside it hitting the same callsite with no
//! subscriber could cache "never" while this one's subscriber was not yet registered.

use std::collections::BTreeMap;
use std::sync::Arc;

use cloud_controllers::cloud::{CloudProvider, InstrumentedCloud};
use fake_cloud::{Facets, FakeCloud, FakeInstance, FaultSpec, Method, objects};
use k8s_openapi::api::core::v1::{Node, Service};
use parking_lot::Mutex;
use tracing::Instrument;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::with_default;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// The fake cloud with a load balancer and InstancesV2; `InstanceShutdown` fails.
fn fake() -> FakeCloud {
    let cloud = FakeCloud::builder()
        .facets(Facets {
            load_balancer: true,
            instances_v2: true,
            ..Facets::none()
        })
        .instance(FakeInstance::new("n"))
        .lb_pool_cidr("10.0.0.0/29")
        .build()
        .expect("a valid fake cloud");
    cloud.fail(
        Method::InstanceShutdown,
        FaultSpec::other("api unreachable"),
    );
    cloud
}

fn node(name: &str) -> Node {
    objects::node(name, None)
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
