//! The OpenTelemetry tracer provider: sampler, resource, and the batched OTLP exporter.
//!
//! Export never blocks a reconcile: spans are handed to the SDK's `BatchSpanProcessor`, which
//! keeps a bounded queue (2048 spans, `OTEL_BSP_MAX_QUEUE_SIZE`) and exports from its own thread.
//! When the collector is slow or down, the queue fills and new spans are dropped (the SDK counts
//! them and logs once); retries with backoff happen on the export thread only.

use std::collections::BTreeMap;

use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};

use super::TelemetryError;
use super::options::{OtlpProtocol, ResolvedTracing, SamplerKind};

/// Builds the provider; with no export target it still makes spans (trace ids for logs and
/// `traceparent` for API calls) but sends them nowhere.
pub fn tracer_provider(
    settings: &ResolvedTracing,
    resource: &BTreeMap<String, String>,
) -> Result<SdkTracerProvider, TelemetryError> {
    let resource = Resource::builder_empty()
        .with_attributes(
            resource
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .build();
    let mut builder = SdkTracerProvider::builder()
        .with_sampler(sampler(settings.sampler, settings.ratio))
        .with_resource(resource);
    if let Some(target) = &settings.export {
        let exporter = match target.protocol {
            OtlpProtocol::Grpc => {
                // tonic spawns its connection onto the current Tokio runtime.
                if tokio::runtime::Handle::try_current().is_err() {
                    return Err(TelemetryError::NoRuntime);
                }
                SpanExporter::builder()
                    .with_tonic()
                    .with_endpoint(target.endpoint.clone())
                    .build()
            }
            OtlpProtocol::HttpProtobuf => SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(target.endpoint.clone())
                .build(),
        }
        .map_err(|e| TelemetryError::Exporter {
            endpoint: target.endpoint.clone(),
            message: e.to_string(),
        })?;
        builder = builder.with_batch_exporter(exporter);
    }
    Ok(builder.build())
}

fn sampler(kind: SamplerKind, ratio: f64) -> Sampler {
    let parent_based = |root: Sampler| Sampler::ParentBased(Box::new(root));
    match kind {
        SamplerKind::AlwaysOn => Sampler::AlwaysOn,
        SamplerKind::AlwaysOff => Sampler::AlwaysOff,
        SamplerKind::TraceIdRatio => Sampler::TraceIdRatioBased(ratio),
        SamplerKind::ParentBasedAlwaysOn => parent_based(Sampler::AlwaysOn),
        SamplerKind::ParentBasedAlwaysOff => parent_based(Sampler::AlwaysOff),
        SamplerKind::ParentBasedTraceIdRatio => parent_based(Sampler::TraceIdRatioBased(ratio)),
    }
}
