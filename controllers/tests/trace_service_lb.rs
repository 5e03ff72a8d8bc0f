//! The reconcile trace end to end: the manager with the stock service-lb controller, the fake
//! cloud behind `InstrumentedCloud`, and the framework's client stack over kube-testenv, exporting
//! to an independent in-test OTLP receiver (built on `opentelemetry-proto`) over gRPC and over
//! HTTP/protobuf. One LoadBalancer Service is created; what arrives on the wire must be one trace
//! whose root is the Service's reconcile, with the `EnsureLoadBalancer` cloud span and the API
//! spans as its children, and a link to the `enqueue` span that queued it, itself a child of the
//! `watch event` span of the Service's ADDED.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cloud_controllers::cloud::{CloudProvider, InstrumentedCloud};
use cloud_controllers::options::CloudOptions;
use cloud_controllers::{CloudContext, cloud_initializers};
use controller_manager::client::client_from_config;
use controller_manager::manager::{Manager, ManagerConfig};
use controller_manager::options::{LogFormat, LoggingOptions};
use controller_manager::telemetry::testing::{OtlpReceiver, ReceivedSpan, Transport};
use controller_manager::telemetry::{OtlpProtocol, TelemetryOptions, build_dispatch};
use fake_cloud::FakeCloud;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube_testenv::TestEnv;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(60);

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    cloud: CloudOptions,
}

async fn seed(env: &TestEnv) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(env.client());
    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": "n1" },
        "spec": { "providerID": "fake://n1" }
    }))?;
    nodes.create(&PostParams::default(), &node).await?;
    let ready = json!({ "status": { "conditions": [{ "type": "Ready", "status": "True" }] } });
    nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(&ready))
        .await?;
    Ok(())
}

fn lb_service() -> anyhow::Result<Service> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": "web", "namespace": "default" },
        "spec": {
            "type": "LoadBalancer",
            "selector": { "app": "web" },
            "ports": [{ "name": "http", "port": 80 }]
        }
    }))?)
}

fn has_ingress(svc: Option<&Service>) -> bool {
    svc.and_then(|s| s.status.as_ref())
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|i| !i.is_empty())
}

/// Runs the manager until the Service has its ingress IP, flushes, and returns what arrived.
async fn reconcile_one_service(protocol: OtlpProtocol) -> anyhow::Result<Vec<ReceivedSpan>> {
    let receiver = OtlpReceiver::start().await?;
    let endpoint = match protocol {
        OtlpProtocol::Grpc => receiver.grpc_endpoint(),
        OtlpProtocol::HttpProtobuf => receiver.http_endpoint(),
    };
    let env_vars =
        move |name: &str| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| endpoint.clone());
    let telemetry = TelemetryOptions {
        otlp_protocol: Some(protocol),
        ..TelemetryOptions::default()
    };
    let logging = LoggingOptions {
        verbosity: 0,
        logging_format: LogFormat::Text,
    };
    let (dispatch, guard) = build_dispatch(
        "cloud-controller-manager",
        &logging,
        &telemetry,
        &env_vars,
        std::io::sink,
    )?;
    // The test runs on a current-thread runtime, so every task of the manager, the API server and
    // the receiver is polled on this thread, under this subscriber.
    let dispatch_guard = tracing::dispatcher::set_default(&dispatch);

    let env = TestEnv::start().await?;
    seed(&env).await?;
    let client = client_from_config(env.config(), 0.0, 0, "trace-test", None)?;
    let cloud: Arc<dyn CloudProvider> =
        Arc::new(InstrumentedCloud::new(Arc::new(FakeCloud::new()), None));
    let flags = Flags::try_parse_from(["test", "--cloud-provider=fake"])?;
    let mut config = ManagerConfig::new("cloud-controller-manager");
    config.controllers = vec!["service".to_string()];
    let manager = Manager::new(config, client, CloudContext::new(cloud, flags.cloud))
        .with_initializers(cloud_initializers());
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));

    let services: Api<Service> = Api::namespaced(env.client(), "default");
    services
        .create(&PostParams::default(), &lb_service()?)
        .await?;
    tokio::time::timeout(
        DEADLINE,
        await_condition(services, "web", |s: Option<&Service>| has_ingress(s)),
    )
    .await??;

    shutdown.cancel();
    tokio::time::timeout(DEADLINE, running).await???;
    drop(dispatch_guard);
    guard.shutdown().await?;
    let spans = tokio::time::timeout(
        DEADLINE,
        receiver.wait_for(|spans| spans.iter().any(|s| s.name == "EnsureLoadBalancer")),
    )
    .await?;
    let transport = match protocol {
        OtlpProtocol::Grpc => Transport::Grpc,
        OtlpProtocol::HttpProtobuf => Transport::HttpProtobuf,
    };
    assert!(spans.iter().all(|s| s.transport == transport));
    Ok(spans)
}

/// Whether `span` hangs (directly or through the controller's own spans) under `root`.
fn descends_from(span: &ReceivedSpan, root: &ReceivedSpan, trace: &[&ReceivedSpan]) -> bool {
    let mut current = span;
    while let Some(parent) = current.parent_span_id.as_deref() {
        if parent == root.span_id {
            return true;
        }
        match trace.iter().find(|s| s.span_id == parent) {
            Some(next) => current = next,
            None => return false,
        }
    }
    false
}

fn assert_reconcile_trace(spans: &[ReceivedSpan]) {
    let reconciles: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "reconcile" && s.attr("object.ref") == Some("default/web"))
        .collect();
    assert_eq!(
        reconciles.len(),
        1,
        "one reconcile of the Service: {reconciles:#?}"
    );
    let ensures: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "EnsureLoadBalancer")
        .collect();
    assert_eq!(ensures.len(), 1, "one EnsureLoadBalancer call: {spans:#?}");
    let ensure = ensures[0];
    let trace: Vec<_> = spans
        .iter()
        .filter(|s| s.trace_id == ensure.trace_id)
        .collect();
    let roots: Vec<_> = trace
        .iter()
        .filter(|s| s.parent_span_id.is_none())
        .collect();
    assert_eq!(roots.len(), 1, "one root in the trace: {trace:#?}");
    let root = roots[0];
    assert_eq!(root.name, "reconcile");
    assert_eq!(root.kind, 1, "internal");
    assert_eq!(root.attr("controller"), Some("service-lb-controller"));
    assert_eq!(root.attr("object.ref"), Some("default/web"));
    assert_eq!(root.attr("reason"), Some("add"));
    assert_eq!(root.attr("attempt"), Some("0"));
    assert_eq!(root.attr("outcome"), Some("done"));
    assert_eq!(root.resource["service.name"], "cloud-controller-manager");

    // The service controller opens its own `sync_service` span inside the reconcile, so the
    // calls are the reconcile's descendants rather than its direct children.
    assert!(
        descends_from(ensure, root, &trace),
        "{ensure:#?} under {root:#?}"
    );
    assert_eq!(ensure.kind, 3, "client");
    assert_eq!(ensure.attr("cloud.provider"), Some("fake"));
    assert_eq!(ensure.attr("cloud.method"), Some("EnsureLoadBalancer"));
    assert_eq!(ensure.attr("cloud.outcome"), Some("success"));

    let api: Vec<_> = trace
        .iter()
        .filter(|s| s.attributes.contains_key("k8s.verb"))
        .collect();
    assert!(
        api.iter().any(|s| s.name == "patch services/status"),
        "finalizer and status patches: {trace:#?}"
    );
    for span in &api {
        assert!(
            descends_from(span, root, &trace),
            "{span:#?} under {root:#?}"
        );
        assert_eq!(span.kind, 3, "client");
        assert_eq!(span.attr("k8s.namespace"), Some("default"));
        assert_eq!(span.attr("k8s.name"), Some("web"));
        assert_eq!(span.attr("http.response.status_code"), Some("200"));
    }
    assert!(
        trace
            .iter()
            .all(|s| s.parent_span_id.is_none() || descends_from(s, root, &trace)),
        "every span of the trace hangs under the reconcile: {trace:#?}"
    );

    // The reconcile is linked to the enqueue of the watch event that queued it, in its own trace.
    let enqueues: Vec<_> = spans
        .iter()
        .filter(|s| {
            s.name == "enqueue"
                && s.attr("queue") == Some("service")
                && s.attr("key") == Some("\"default/web\"")
        })
        .collect();
    assert!(!enqueues.is_empty(), "enqueue spans: {spans:#?}");
    assert!(
        enqueues.iter().any(|e| root.links_to(e)),
        "{root:#?} links to one of {enqueues:#?}"
    );
    for e in &enqueues {
        assert_ne!(
            e.trace_id, root.trace_id,
            "the enqueue is not part of the reconcile trace"
        );
        assert_eq!(e.kind, 4, "producer");
        assert_eq!(e.attr("reason"), Some("add"));
    }

    // The linked enqueue was made by the Service informer's handler, inside the `watch event`
    // span of the event that added the Service: the root of the enqueue's trace.
    let linked = enqueues
        .iter()
        .find(|e| root.links_to(e))
        .expect("checked above");
    let event = spans
        .iter()
        .find(|s| linked.is_child_of(s))
        .unwrap_or_else(|| panic!("the parent of {linked:#?} arrived: {spans:#?}"));
    assert_eq!(event.name, "watch event");
    assert_eq!(event.parent_span_id, None, "the watch event is a root");
    assert_eq!(event.trace_id, linked.trace_id);
    assert_eq!(event.attr("k8s.kind"), Some("Service"));
    assert_eq!(event.attr("object.ref"), Some("default/web"));
    assert_eq!(event.attr("event.type"), Some("added"));
    // The Service is created while the manager starts: it arrives in the first list or as a
    // watch ADDED, depending on which comes first.
    assert!(
        matches!(event.attr("event.source"), Some("watch" | "list")),
        "{event:#?}"
    );
    assert!(
        event
            .attr("k8s.resource_version")
            .is_some_and(|rv| !rv.is_empty()),
        "{event:#?}"
    );
}

#[tokio::test]
async fn service_reconcile_trace_arrives_over_grpc() -> anyhow::Result<()> {
    let spans = reconcile_one_service(OtlpProtocol::Grpc).await?;
    assert_reconcile_trace(&spans);
    Ok(())
}

#[tokio::test]
async fn service_reconcile_trace_arrives_over_http_protobuf() -> anyhow::Result<()> {
    let spans = reconcile_one_service(OtlpProtocol::HttpProtobuf).await?;
    assert_reconcile_trace(&spans);
    Ok(())
}
