//! End to end: spans made under the subscriber from `telemetry::build_dispatch` cross the wire
//! to an independent OTLP receiver, over gRPC and over HTTP/protobuf, with the resource and the
//! parent/child links intact.

use std::time::Duration;

use controller_manager::options::{LogFormat, LoggingOptions};
use controller_manager::telemetry::testing::{OtlpReceiver, ReceivedSpan, Transport};
use controller_manager::telemetry::{OtlpProtocol, TelemetryOptions, build_dispatch};
use tracing::{info, info_span};

fn logging() -> LoggingOptions {
    LoggingOptions {
        verbosity: 0,
        logging_format: LogFormat::Text,
    }
}

async fn export_one_trace(protocol: OtlpProtocol) -> anyhow::Result<()> {
    let receiver = OtlpReceiver::start().await?;
    let endpoint = match protocol {
        OtlpProtocol::Grpc => receiver.grpc_endpoint(),
        OtlpProtocol::HttpProtobuf => receiver.http_endpoint(),
    };
    // The endpoint comes from the standard variable, the protocol from the flag.
    let env = move |name: &str| match name {
        "OTEL_EXPORTER_OTLP_ENDPOINT" => Some(endpoint.clone()),
        "OTEL_RESOURCE_ATTRIBUTES" => Some("deployment.environment=test".to_string()),
        "POD_NAME" => Some("ccm-0".to_string()),
        _ => None,
    };
    let options = TelemetryOptions {
        otlp_protocol: Some(protocol),
        ..TelemetryOptions::default()
    };
    let (dispatch, guard) = build_dispatch(
        "cloud-controller-manager",
        &logging(),
        &options,
        &env,
        std::io::sink,
    )?;

    tracing::dispatcher::with_default(&dispatch, || {
        let root = info_span!(
            "reconcile",
            controller = "service",
            object.r#ref = "default/lb"
        );
        root.in_scope(|| {
            let child = info_span!(
                "EnsureLoadBalancer",
                otel.kind = "client",
                cloud.provider = "fake"
            );
            child.in_scope(|| info!("calling the cloud"));
            // The exporter's own transport is never exported, whatever the filter allows.
            info_span!(target: "hyper::client", "transport").in_scope(|| {});
        });
    });
    guard.shutdown().await?;

    let spans =
        tokio::time::timeout(Duration::from_secs(20), receiver.wait_for(|s| s.len() >= 2)).await?;
    let find = |name: &str| -> anyhow::Result<&ReceivedSpan> {
        spans
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| anyhow::anyhow!("no span {name} in {spans:#?}"))
    };
    assert!(
        spans.iter().all(|s| s.name != "transport"),
        "transport spans leaked: {spans:#?}"
    );
    let root = find("reconcile")?;
    let child = find("EnsureLoadBalancer")?;

    let expected_transport = match protocol {
        OtlpProtocol::Grpc => Transport::Grpc,
        OtlpProtocol::HttpProtobuf => Transport::HttpProtobuf,
    };
    for span in [root, child] {
        assert_eq!(span.transport, expected_transport);
        assert_eq!(span.resource["service.name"], "cloud-controller-manager");
        assert_eq!(span.resource["deployment.environment"], "test");
        assert_eq!(span.resource["k8s.pod.name"], "ccm-0");
        assert!(span.resource.contains_key("service.instance.id"));
    }
    assert_eq!(root.parent_span_id, None, "reconcile must be a root span");
    assert!(
        child.is_child_of(root),
        "{child:#?} is not a child of {root:#?}"
    );
    assert_eq!(root.attr("controller"), Some("service"));
    assert_eq!(root.attr("object.ref"), Some("default/lb"));
    assert_eq!(child.kind, 3, "otel.kind=client maps to SPAN_KIND_CLIENT");
    assert_eq!(child.attr("cloud.provider"), Some("fake"));
    Ok(())
}

#[tokio::test]
async fn grpc_export_delivers_spans_with_resource_and_parent_links() -> anyhow::Result<()> {
    export_one_trace(OtlpProtocol::Grpc).await
}

#[tokio::test]
async fn http_protobuf_export_delivers_spans_with_resource_and_parent_links() -> anyhow::Result<()>
{
    export_one_trace(OtlpProtocol::HttpProtobuf).await
}

#[tokio::test]
async fn unreachable_collector_does_not_block_span_creation() -> anyhow::Result<()> {
    // Nothing listens on this port; making spans must not wait for the exporter.
    let env = |name: &str| {
        (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://127.0.0.1:9".to_string())
    };
    let (dispatch, guard) = build_dispatch(
        "cloud-controller-manager",
        &logging(),
        &TelemetryOptions::default(),
        &env,
        std::io::sink,
    )?;
    let started = std::time::Instant::now();
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..5_000 {
            info_span!("reconcile", i).in_scope(|| {});
        }
    });
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "making 5000 spans took {:?}",
        started.elapsed()
    );
    drop(dispatch);
    // Shutdown reports the failed export instead of hanging.
    let shutdown = tokio::time::timeout(Duration::from_secs(60), guard.shutdown()).await;
    assert!(
        shutdown.is_ok(),
        "shutdown hung on an unreachable collector"
    );
    Ok(())
}
