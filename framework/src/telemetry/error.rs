//! [`TelemetryError`]: why logging or tracing could not be set up.

/// Why telemetry could not be set up; each says which flag or variable to change.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// A flag or `OTEL_*` variable has a value we cannot use.
    #[error("{setting}: {message}")]
    InvalidSetting {
        /// The flag or variable.
        setting: &'static str,
        /// What is wrong and what is accepted.
        message: String,
    },
    /// `RUST_LOG` (or the filter made from `-v`) does not parse.
    #[error("invalid log filter {directives:?} (from RUST_LOG): {message}")]
    InvalidFilter {
        /// The directives that failed.
        directives: String,
        /// The parser's complaint.
        message: String,
    },
    /// The OTLP exporter could not be built.
    #[error("cannot build the OTLP trace exporter for {endpoint}: {message}")]
    Exporter {
        /// The resolved endpoint.
        endpoint: String,
        /// The exporter's complaint.
        message: String,
    },
    /// The gRPC exporter needs a Tokio runtime at construction.
    #[error(
        "the OTLP gRPC exporter must be built inside a Tokio runtime: call telemetry::init from async code, or use --otlp-protocol=http/protobuf"
    )]
    NoRuntime,
    /// Someone installed a global subscriber (or `log` logger) first.
    #[error(
        "a global tracing subscriber or log logger is already installed; call telemetry::init once, before anything logs"
    )]
    AlreadyInitialized,
    /// Flushing or shutting the exporter down failed (spans may be lost).
    #[error("flushing spans to the OTLP collector failed: {0}")]
    Flush(String),
}
