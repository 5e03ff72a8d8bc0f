//! The full client stack against a tiny recording HTTP server: the `traceparent` sent on the
//! wire belongs to the request's client span, which is a child of the caller's span; the user
//! agent is set; the `rest_client_*` metrics are recorded with the API server's host.

use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;
use controller_manager::client::{ClientMetrics, client_from_config};
use controller_manager::options::{LogFormat, LoggingOptions};
use controller_manager::telemetry::testing::OtlpReceiver;
use controller_manager::telemetry::{OtlpProtocol, TelemetryOptions, build_dispatch};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use opentelemetry::trace::TraceContextExt;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Serves `GET /api/v1/nodes/{name}` with a minimal Node and records each request's headers.
async fn recording_api_server() -> anyhow::Result<(String, Arc<Mutex<Vec<HeaderMap>>>)> {
    let seen: Arc<Mutex<Vec<HeaderMap>>> = Arc::default();
    let record = seen.clone();
    let app = axum::Router::new()
        .route(
            "/api/v1/nodes",
            // A watch that ends at once: enough for the request to be seen.
            axum::routing::get(|| async {
                ([(axum::http::header::CONTENT_TYPE, "application/json")], "")
            }),
        )
        .route(
            "/api/v1/nodes/{name}",
            axum::routing::get(
                move |axum::extract::Path(name): axum::extract::Path<String>,
                      headers: HeaderMap| {
                    let record = record.clone();
                    async move {
                        record.lock().push(headers);
                        let body = serde_json::json!({
                            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name}
                        });
                        (
                            [(axum::http::header::CONTENT_TYPE, "application/json")],
                            body.to_string(),
                        )
                    }
                },
            ),
        );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((format!("http://{addr}"), seen))
}

fn parse_traceparent(headers: &HeaderMap) -> anyhow::Result<(String, String)> {
    let value = headers
        .get("traceparent")
        .ok_or_else(|| anyhow::anyhow!("no traceparent header in {headers:?}"))?
        .to_str()?;
    let parts: Vec<&str> = value.split('-').collect();
    anyhow::ensure!(
        parts.len() == 4 && parts[0] == "00",
        "malformed traceparent {value}"
    );
    Ok((parts[1].to_string(), parts[2].to_string()))
}

#[tokio::test]
async fn traceparent_on_the_wire_is_the_client_span_under_the_callers_trace() -> anyhow::Result<()>
{
    let (server, seen) = recording_api_server().await?;
    let receiver = OtlpReceiver::start().await?;
    let endpoint = receiver.http_endpoint();
    let env = move |name: &str| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| endpoint.clone());
    let logging = LoggingOptions {
        verbosity: 0,
        logging_format: LogFormat::Text,
    };
    let options = TelemetryOptions {
        otlp_protocol: Some(OtlpProtocol::HttpProtobuf),
        ..TelemetryOptions::default()
    };
    let (dispatch, guard) = build_dispatch("ccm-test", &logging, &options, &env, std::io::sink)?;
    let _default = tracing::dispatcher::set_default(&dispatch);

    let mut registry = Registry::default();
    let metrics = ClientMetrics::new(&mut registry);
    let config = kube::Config::new(server.parse()?);
    let client = client_from_config(
        config,
        50.0,
        10,
        "ccm-test/v0 (linux) node-controller",
        Some(&metrics),
    )?;

    let root = tracing::info_span!("reconcile", controller = "cloud-node");
    let root_trace_id = root.context().span().span_context().trace_id().to_string();
    let node = Api::<Node>::all(client)
        .get("n1")
        .instrument(root.clone())
        .await?;
    assert_eq!(node.metadata.name.as_deref(), Some("n1"));
    drop(root);

    let headers = seen
        .lock()
        .pop()
        .ok_or_else(|| anyhow::anyhow!("no request reached the server"))?;
    let (wire_trace_id, wire_parent_id) = parse_traceparent(&headers)?;
    assert_eq!(
        wire_trace_id, root_trace_id,
        "traceparent is not in the caller's trace"
    );
    assert_eq!(
        headers.get("user-agent").and_then(|v| v.to_str().ok()),
        Some("ccm-test/v0 (linux) node-controller")
    );

    guard.shutdown().await?;
    let spans = tokio::time::timeout(
        Duration::from_secs(20),
        receiver.wait_for(|s| {
            s.iter().any(|s| s.name == "reconcile") && s.iter().any(|s| s.name == "get nodes")
        }),
    )
    .await?;
    let reconcile = spans
        .iter()
        .find(|s| s.name == "reconcile")
        .ok_or_else(|| anyhow::anyhow!("no reconcile span"))?;
    let api = spans
        .iter()
        .find(|s| s.name == "get nodes")
        .ok_or_else(|| anyhow::anyhow!("no api span"))?;
    assert!(api.is_child_of(reconcile), "{api:#?}");
    assert_eq!(
        api.span_id, wire_parent_id,
        "traceparent must name the client span"
    );
    assert_eq!(api.kind, 3);
    assert_eq!(api.attr("k8s.verb"), Some("get"));
    assert_eq!(api.attr("k8s.resource"), Some("nodes"));
    assert_eq!(api.attr("k8s.name"), Some("n1"));
    assert_eq!(api.attr("http.request.method"), Some("GET"));
    assert_eq!(api.attr("http.response.status_code"), Some("200"));

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    let host = server.trim_start_matches("http://");
    assert!(
        text.contains(&format!(
            r#"rest_client_requests_total{{code="200",method="GET",host="{host}"}} 1"#
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            r#"rest_client_request_duration_seconds_count{{verb="GET",host="{host}"}} 1"#
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            r#"rest_client_rate_limiter_duration_seconds_count{{verb="GET",host="{host}"}} 1"#
        )),
        "{text}"
    );
    Ok(())
}

#[tokio::test]
async fn without_an_opentelemetry_layer_no_traceparent_is_sent() -> anyhow::Result<()> {
    // A plain registry: spans exist but have no OpenTelemetry context. (A scoped subscriber, not
    // none at all, so this test cannot poison the callsite cache the other test relies on.)
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry());
    let _default = tracing::dispatcher::set_default(&dispatch);
    let (server, seen) = recording_api_server().await?;
    let client = client_from_config(kube::Config::new(server.parse()?), 5.0, 1, "ua", None)?;
    Api::<Node>::all(client).get("n2").await?;
    let headers = seen
        .lock()
        .pop()
        .ok_or_else(|| anyhow::anyhow!("no request"))?;
    assert!(headers.get("traceparent").is_none(), "{headers:?}");
    Ok(())
}

#[tokio::test]
async fn the_built_client_is_rate_limited_but_watches_are_not() -> anyhow::Result<()> {
    // Scoped, so this test cannot poison the callsite cache the traceparent test relies on.
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry());
    let _default = tracing::dispatcher::set_default(&dispatch);
    let (server, _seen) = recording_api_server().await?;
    let mut registry = Registry::default();
    let metrics = ClientMetrics::new(&mut registry);
    // One token, refilled once per second.
    let client = client_from_config(
        kube::Config::new(server.parse()?),
        1.0,
        1,
        "ua",
        Some(&metrics),
    )?;
    let nodes = Api::<Node>::all(client);
    let started = std::time::Instant::now();
    nodes.get("n1").await?;
    let _watch = nodes.watch(&kube::api::WatchParams::default(), "0").await?;
    let watch_done = started.elapsed();
    nodes.get("n2").await?;
    let second_get_done = started.elapsed();
    assert!(
        watch_done < Duration::from_millis(500),
        "the watch waited for a token: {watch_done:?}"
    );
    assert!(
        second_get_done >= Duration::from_millis(900),
        "the second get did not wait for the refill: {second_get_done:?}"
    );
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    let host = server.trim_start_matches("http://");
    assert!(
        text.contains(&format!(
            r#"rest_client_rate_limiter_duration_seconds_count{{verb="GET",host="{host}"}} 2"#
        )),
        "only the two gets pay: {text}"
    );
    Ok(())
}

#[tokio::test]
async fn build_client_reads_the_kubeconfig_flag() -> anyhow::Result<()> {
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry());
    let _default = tracing::dispatcher::set_default(&dispatch);
    let (server, seen) = recording_api_server().await?;
    let dir = std::env::temp_dir().join(format!("client-stack-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{server}\"}}}}]\n\
             users: [{{name: u, user: {{token: secret-token}}}}]\n\
             contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
        ),
    )?;
    let opts = controller_manager::options::ClientOptions {
        kubeconfig: Some(path),
        master: None,
        kube_api_qps: 20.0,
        kube_api_burst: 30,
        use_service_account_credentials: false,
    };
    let client = controller_manager::client::build_client(
        &opts,
        "cloud-controller-manager/v0/cloud-node",
        None,
    )
    .await?;
    Api::<Node>::all(client).get("n3").await?;
    let headers = seen
        .lock()
        .pop()
        .ok_or_else(|| anyhow::anyhow!("no request"))?;
    assert_eq!(
        headers.get("authorization").and_then(|v| v.to_str().ok()),
        Some("Bearer secret-token")
    );
    assert_eq!(
        headers.get("user-agent").and_then(|v| v.to_str().ok()),
        Some("cloud-controller-manager/v0/cloud-node")
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
