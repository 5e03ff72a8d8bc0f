//! Log lines written inside a span carry that span's trace id, in text and JSON, and lines
//! outside any span carry none.

use std::io::Write;
use std::sync::{Arc, Mutex};

use controller_manager::options::{LogFormat, LoggingOptions};
use controller_manager::telemetry::{TelemetryOptions, build_dispatch};
use opentelemetry::trace::TraceContextExt;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::fmt::MakeWriter;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn lines(&self) -> Vec<String> {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Logs one line inside a span and one outside; returns the lines and the span's trace id.
fn log_in_and_out_of_span(format: LogFormat, env: &[(&str, &str)]) -> (Vec<String>, String) {
    let captured = Captured::default();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let lookup = move |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let logging = LoggingOptions {
        verbosity: 0,
        logging_format: format,
    };
    let (dispatch, _guard) = build_dispatch(
        "test",
        &logging,
        &TelemetryOptions::default(),
        &lookup,
        captured.clone(),
    )
    .unwrap();
    let trace_id = tracing::dispatcher::with_default(&dispatch, || {
        let span = tracing::info_span!("reconcile", controller = "node");
        let trace_id = span.context().span().span_context().trace_id().to_string();
        span.in_scope(|| tracing::info!(node = "n1", "synced"));
        tracing::info!("outside");
        tracing::debug!("hidden at -v=0");
        trace_id
    });
    (captured.lines(), trace_id)
}

#[test]
fn text_lines_end_with_the_trace_id_of_their_span() {
    let (lines, trace_id) = log_in_and_out_of_span(LogFormat::Text, &[]);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains("synced"), "{lines:?}");
    assert!(
        lines[0].contains("node=\"n1\"") || lines[0].contains("node=n1"),
        "{lines:?}"
    );
    assert!(
        lines[0].ends_with(&format!(" trace_id={trace_id}")),
        "{lines:?}"
    );
    assert_ne!(trace_id, "00000000000000000000000000000000");
    assert!(!lines[1].contains("trace_id"), "{lines:?}");
}

#[test]
fn json_lines_have_a_trace_id_field() {
    let (lines, trace_id) = log_in_and_out_of_span(LogFormat::Json, &[]);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let inside: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(inside["trace_id"], trace_id.as_str());
    assert_eq!(inside["fields"]["message"], "synced");
    assert_eq!(inside["span"]["controller"], "node");
    let outside: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    assert!(outside.get("trace_id").is_none(), "{outside}");
}

#[test]
fn rust_log_overrides_verbosity() {
    let (lines, _) = log_in_and_out_of_span(LogFormat::Text, &[("RUST_LOG", "debug")]);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[2].contains("hidden at -v=0"), "{lines:?}");
}
