//! Logs and traces for the whole process, set up by one call.
//!
//! [`init`] installs a `tracing` subscriber made of an [`EnvFilter`](tracing_subscriber::EnvFilter)
//! (`RUST_LOG`, else the klog-style `-v` level, see [`filter`]), a text or JSON log formatter
//! whose lines carry the trace id of their span ([`format`](mod@format)), and a `tracing-opentelemetry` layer
//! that turns spans into OpenTelemetry spans. When an OTLP endpoint is configured, by flag or by
//! the standard `OTEL_*` variables ([`options`]), spans are exported in batches over gRPC or
//! HTTP/protobuf ([`provider`]); otherwise they are made but not sent, so log lines still share
//! trace ids and API requests still carry `traceparent`.
//!
//! The returned [`TelemetryGuard`] flushes buffered spans on [`TelemetryGuard::shutdown`] (or,
//! best effort, on drop): keep it alive for the life of the process.
//!
//! Export can never stall the manager: the batch processor's queue is bounded and exports on its
//! own thread; the HTTP exporter uses the blocking reqwest client because that thread has no
//! Tokio runtime, and the gRPC exporter is built on the caller's runtime (hence [`init`] must run
//! inside one for `grpc`). Spans of the exporter's own HTTP stack (`h2`, `hyper`, `tonic`,
//! `reqwest`, `tower`) are never exported, so raising `RUST_LOG` cannot make the exporter trace
//! itself in a loop.

mod error;
pub mod filter;
pub mod format;
pub mod options;
pub mod provider;
pub mod resource;
#[cfg(feature = "otlp-receiver")]
pub mod testing;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Dispatch;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry};

use crate::options::{LogFormat, LoggingOptions};

pub use error::TelemetryError;
pub use format::{LineShape, TraceIdFormat};
pub use options::{OtlpProtocol, ResolvedTracing, SamplerKind, TelemetryOptions};

/// Targets whose spans are never exported: the exporter's own transport.
const NEVER_EXPORTED: &[&str] = &[
    "h2",
    "hyper",
    "hyper_util",
    "tonic",
    "tower",
    "reqwest",
    "opentelemetry",
    "opentelemetry_sdk",
    "opentelemetry_otlp",
    "opentelemetry_http",
];

/// Keeps the tracer provider alive and flushes its spans when the process ends.
///
/// Prefer `guard.shutdown().await` at the end of `main`: it flushes on a blocking thread while the
/// runtime keeps driving the gRPC connection. Dropping the guard flushes too, but on a
/// current-thread runtime a gRPC flush from `drop` cannot make progress and waits for the export
/// timeout before giving up.
#[must_use = "dropping the guard shuts the span exporter down"]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    /// The provider behind the `tracing` layer, for code that makes OpenTelemetry spans directly.
    pub fn tracer_provider(&self) -> Option<&SdkTracerProvider> {
        self.provider.as_ref()
    }

    /// Exports every finished span now; runs on a blocking thread so the caller's runtime keeps
    /// driving the gRPC connection.
    pub async fn force_flush(&self) -> Result<(), TelemetryError> {
        let Some(provider) = self.provider.clone() else {
            return Ok(());
        };
        run_blocking(move || provider.force_flush()).await
    }

    /// Flushes and stops the exporter; spans ended after this are dropped.
    pub async fn shutdown(mut self) -> Result<(), TelemetryError> {
        let Some(provider) = self.provider.take() else {
            return Ok(());
        };
        run_blocking(move || provider.shutdown()).await
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        let Some(provider) = self.provider.take() else {
            return;
        };
        // Best effort: on a multi-thread runtime other workers keep driving the gRPC channel.
        let result = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| provider.shutdown())
            }
            _ => provider.shutdown(),
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "flushing spans on exit failed");
        }
    }
}

async fn run_blocking(
    f: impl FnOnce() -> opentelemetry_sdk::error::OTelSdkResult + Send + 'static,
) -> Result<(), TelemetryError> {
    let result = match tokio::runtime::Handle::try_current() {
        Ok(_) => tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| TelemetryError::Flush(e.to_string()))?,
        Err(_) => f(),
    };
    result.map_err(|e| TelemetryError::Flush(e.to_string()))
}

/// Installs logging and tracing for the process, reading `RUST_LOG` and `OTEL_*` from the
/// environment and writing logs to stderr. Call once, early, inside the Tokio runtime.
pub fn init(
    service_name: &str,
    logging: &LoggingOptions,
    tracing: &TelemetryOptions,
) -> Result<TelemetryGuard, TelemetryError> {
    let env = |name: &str| std::env::var(name).ok();
    let (dispatch, guard) = build_dispatch(service_name, logging, tracing, &env, std::io::stderr)?;
    // Also routes records of `log`-based dependencies (rustls, ...) into the subscriber.
    tracing_subscriber::util::SubscriberInitExt::try_init(dispatch)
        .map_err(|_| TelemetryError::AlreadyInitialized)?;
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    if let Some(provider) = guard.tracer_provider() {
        opentelemetry::global::set_tracer_provider(provider.clone());
    }
    Ok(guard)
}

/// The subscriber [`init`] installs, without installing it: for tests (scoped with
/// `tracing::dispatcher::set_default`) and embedders that compose their own. `env` replaces the
/// process environment and `writer` receives the log lines.
pub fn build_dispatch<W>(
    service_name: &str,
    logging: &LoggingOptions,
    tracing: &TelemetryOptions,
    env: &dyn Fn(&str) -> Option<String>,
    writer: W,
) -> Result<(Dispatch, TelemetryGuard), TelemetryError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = filter::env_filter(env("RUST_LOG").as_deref(), logging.verbosity)?;
    let settings = tracing.resolve(env)?;
    let resource =
        resource::resource_attributes(service_name, &resource::default_instance_id(), env)?;
    let provider = provider::tracer_provider(&settings, &resource)?;
    let tracer = provider.tracer_with_scope(
        opentelemetry::InstrumentationScope::builder(env!("CARGO_PKG_NAME"))
            .with_version(env!("CARGO_PKG_VERSION"))
            .build(),
    );

    let fmt_layer = match logging.logging_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(writer)
            .event_format(TraceIdFormat::new(
                tracing_subscriber::fmt::format().with_ansi(false),
                LineShape::Text,
            ))
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(writer)
            .event_format(TraceIdFormat::new(
                tracing_subscriber::fmt::format().json(),
                LineShape::Json,
            ))
            .boxed(),
    };
    let otel_layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
            let root = meta.target().split("::").next().unwrap_or_default();
            !NEVER_EXPORTED.contains(&root)
        }));
    let subscriber = Registry::default()
        .with(filter)
        .with(fmt_layer)
        .with(otel_layer);
    Ok((
        Dispatch::new(subscriber),
        TelemetryGuard {
            provider: Some(provider),
        },
    ))
}
