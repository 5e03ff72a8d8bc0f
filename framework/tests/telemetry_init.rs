//! `init` installs the process-wide subscriber exactly once. Its own test binary, because a
//! global subscriber cannot be removed again.

use controller_manager::options::{LogFormat, LoggingOptions};
use controller_manager::telemetry::{
    OtlpProtocol, TelemetryError, TelemetryOptions, build_dispatch, init,
};

fn logging() -> LoggingOptions {
    LoggingOptions {
        verbosity: 2,
        logging_format: LogFormat::Json,
    }
}

#[tokio::test]
async fn init_installs_once_and_refuses_a_second_time() {
    let guard = init(
        "cloud-controller-manager",
        &logging(),
        &TelemetryOptions::default(),
    )
    .expect("first init succeeds");
    // RUST_LOG, when the environment sets it, rightly wins over -v.
    if std::env::var_os("RUST_LOG").is_none() {
        assert!(
            tracing::enabled!(target: "controller_manager::x", tracing::Level::DEBUG),
            "-v=2 enables debug for our crates"
        );
        assert!(
            !tracing::enabled!(target: "hyper", tracing::Level::DEBUG),
            "but not for dependencies"
        );
    }
    let second = init(
        "cloud-controller-manager",
        &logging(),
        &TelemetryOptions::default(),
    );
    assert!(matches!(second, Err(TelemetryError::AlreadyInitialized)));
    guard.shutdown().await.expect("nothing to flush");
}

#[test]
fn grpc_export_outside_a_runtime_is_a_clear_error() {
    let options = TelemetryOptions {
        otlp_endpoint: Some("http://127.0.0.1:4317".into()),
        otlp_protocol: Some(OtlpProtocol::Grpc),
        ..TelemetryOptions::default()
    };
    let result = build_dispatch("t", &logging(), &options, &|_| None, std::io::sink);
    assert!(matches!(result, Err(TelemetryError::NoRuntime)));
    // HTTP needs no runtime.
    let options = TelemetryOptions {
        otlp_protocol: Some(OtlpProtocol::HttpProtobuf),
        ..options
    };
    assert!(build_dispatch("t", &logging(), &options, &|_| None, std::io::sink).is_ok());
}
