//! An in-process OTLP trace receiver for tests (feature `otlp-receiver`): it speaks both
//! protocols the exporter can use, gRPC (`TraceService/Export` on tonic) and HTTP/protobuf
//! (`POST /v1/traces` on axum), on ephemeral loopback ports, and records every span it is sent.
//!
//! It decodes requests with `opentelemetry-proto`, the collector's own wire types, and shares no
//! code with the exporter, so a test that sees a span here saw it cross the wire. Use it from
//! any crate's tests by enabling `controller-manager/otlp-receiver` in `[dev-dependencies]`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use parking_lot::Mutex;
use prost::Message;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Which protocol a span arrived over, so a test can prove both paths work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// OTLP/gRPC.
    Grpc,
    /// OTLP/HTTP with a protobuf body.
    HttpProtobuf,
}

/// One received span, flattened with its resource so assertions stay one-liners.
#[derive(Clone, Debug, PartialEq)]
pub struct ReceivedSpan {
    /// Span name.
    pub name: String,
    /// Lower-case hex trace id.
    pub trace_id: String,
    /// Lower-case hex span id.
    pub span_id: String,
    /// Lower-case hex parent span id; `None` for a root span.
    pub parent_span_id: Option<String>,
    /// OTLP span kind (1 internal, 2 server, 3 client, 4 producer, 5 consumer).
    pub kind: i32,
    /// OTLP status code (0 unset, 1 ok, 2 error).
    pub status_code: i32,
    /// Span attributes rendered as strings.
    pub attributes: BTreeMap<String, String>,
    /// Resource attributes of the sender rendered as strings.
    pub resource: BTreeMap<String, String>,
    /// Links to other spans (e.g. a reconcile's links to the enqueues that caused it).
    pub links: Vec<ReceivedLink>,
    /// The protocol it arrived over.
    pub transport: Transport,
}

impl ReceivedSpan {
    /// A span attribute, if present.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }

    /// Whether `self` carries a link to `other`.
    pub fn links_to(&self, other: &ReceivedSpan) -> bool {
        self.links
            .iter()
            .any(|l| l.trace_id == other.trace_id && l.span_id == other.span_id)
    }

    /// Whether `self` is a direct child of `parent`.
    pub fn is_child_of(&self, parent: &ReceivedSpan) -> bool {
        self.trace_id == parent.trace_id
            && self.parent_span_id.as_deref() == Some(parent.span_id.as_str())
    }
}

/// One span link as received: the linked span's ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceivedLink {
    /// Lower-case hex trace id of the linked span.
    pub trace_id: String,
    /// Lower-case hex span id of the linked span.
    pub span_id: String,
}

#[derive(Default)]
struct Recorded {
    spans: Mutex<Vec<ReceivedSpan>>,
    changed: Notify,
}

impl Recorded {
    fn record(&self, request: ExportTraceServiceRequest, transport: Transport) {
        let mut spans = self.spans.lock();
        for resource_spans in request.resource_spans {
            let resource = resource_spans
                .resource
                .map(|r| attributes(&r.attributes))
                .unwrap_or_default();
            for scope_spans in resource_spans.scope_spans {
                for span in scope_spans.spans {
                    spans.push(ReceivedSpan {
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: (!span.parent_span_id.is_empty())
                            .then(|| hex(&span.parent_span_id)),
                        kind: span.kind,
                        status_code: span.status.map(|s| s.code).unwrap_or_default(),
                        attributes: attributes(&span.attributes),
                        resource: resource.clone(),
                        links: span
                            .links
                            .iter()
                            .map(|l| ReceivedLink {
                                trace_id: hex(&l.trace_id),
                                span_id: hex(&l.span_id),
                            })
                            .collect(),
                        transport,
                    });
                }
            }
        }
        drop(spans);
        self.changed.notify_waiters();
    }
}

/// A running receiver; stops when dropped.
pub struct OtlpReceiver {
    grpc_addr: SocketAddr,
    http_addr: SocketAddr,
    recorded: Arc<Recorded>,
    stop: CancellationToken,
}

impl OtlpReceiver {
    /// Binds both listeners on `127.0.0.1` with ephemeral ports and starts serving.
    pub async fn start() -> std::io::Result<Self> {
        let recorded = Arc::new(Recorded::default());
        let stop = CancellationToken::new();

        let grpc = TcpListener::bind(("127.0.0.1", 0)).await?;
        let grpc_addr = grpc.local_addr()?;
        let service = TraceServiceServer::new(GrpcTraces(recorded.clone()));
        let grpc_stop = stop.clone();
        tokio::spawn(async move {
            let served = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(grpc),
                    grpc_stop.cancelled_owned(),
                )
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "OTLP gRPC test receiver failed");
            }
        });

        let http = TcpListener::bind(("127.0.0.1", 0)).await?;
        let http_addr = http.local_addr()?;
        let http_recorded = recorded.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: Bytes| {
                let recorded = http_recorded.clone();
                async move { http_export(&recorded, body) }
            }),
        );
        let http_stop = stop.clone();
        tokio::spawn(async move {
            let served = axum::serve(http, app)
                .with_graceful_shutdown(http_stop.cancelled_owned())
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "OTLP HTTP test receiver failed");
            }
        });

        Ok(Self {
            grpc_addr,
            http_addr,
            recorded,
            stop,
        })
    }

    /// Base URL for `--otlp-protocol=grpc`.
    pub fn grpc_endpoint(&self) -> String {
        format!("http://{}", self.grpc_addr)
    }

    /// Base URL for `--otlp-protocol=http/protobuf` (the exporter appends `/v1/traces`).
    pub fn http_endpoint(&self) -> String {
        format!("http://{}", self.http_addr)
    }

    /// Every span received so far, in arrival order.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.recorded.spans.lock().clone()
    }

    /// Waits until `done` holds for the received spans and returns them; wrap it in a timeout.
    pub async fn wait_for(&self, done: impl Fn(&[ReceivedSpan]) -> bool) -> Vec<ReceivedSpan> {
        loop {
            let changed = self.recorded.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let spans = self.recorded.spans.lock();
                if done(&spans) {
                    return spans.clone();
                }
            }
            changed.await;
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

struct GrpcTraces(Arc<Recorded>);

#[tonic::async_trait]
impl TraceService for GrpcTraces {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.record(request.into_inner(), Transport::Grpc);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn http_export(recorded: &Recorded, body: Bytes) -> axum::response::Response {
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            recorded.record(request, Transport::HttpProtobuf);
            let response = ExportTraceServiceResponse {
                partial_success: None,
            };
            (
                [(header::CONTENT_TYPE, "application/x-protobuf")],
                response.encode_to_vec(),
            )
                .into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| {
            (
                kv.key.clone(),
                kv.value.as_ref().map(render).unwrap_or_default(),
            )
        })
        .collect()
}

fn render(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::BytesValue(b)) => hex(b),
        Some(any_value::Value::ArrayValue(a)) => {
            let items: Vec<String> = a.values.iter().map(render).collect();
            format!("[{}]", items.join(","))
        }
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
