//! Log lines that name their trace: the current span's OpenTelemetry trace id is appended to
//! every event logged inside a span (text: ` trace_id=<hex>` at the end of the line; JSON: a
//! top-level `"trace_id"` field), so a log search leads straight to the trace in Jaeger.
//!
//! The wrapped formatter renders into a buffer first; ANSI colours are therefore off (the
//! manager's logs go to a container log, as klog's do).

use std::fmt;

use opentelemetry::trace::{TraceContextExt, TraceId};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Whether the wrapped formatter emits text lines or JSON objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineShape {
    /// `... message trace_id=<hex>`.
    Text,
    /// `{..., "trace_id":"<hex>"}`.
    Json,
}

/// A `FormatEvent` that adds the trace id of the event's span to whatever `inner` writes.
#[derive(Clone, Debug)]
pub struct TraceIdFormat<F> {
    inner: F,
    shape: LineShape,
}

impl<F> TraceIdFormat<F> {
    /// Wraps `inner`, which must write one line of the given shape per event.
    pub fn new(inner: F, shape: LineShape) -> Self {
        Self { inner, shape }
    }
}

impl<S, N, F> FormatEvent<S, N> for TraceIdFormat<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let Some(trace_id) = event_trace_id(ctx, event) else {
            return self.inner.format_event(ctx, writer, event);
        };
        let mut line = String::with_capacity(256);
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        let had_newline = line.ends_with('\n');
        let body = line.trim_end_matches('\n');
        match self.shape {
            LineShape::Text => write!(writer, "{body} trace_id={trace_id}")?,
            LineShape::Json => match body.strip_suffix('}') {
                Some(open) => write!(writer, "{open},\"trace_id\":\"{trace_id}\"}}")?,
                None => writer.write_str(body)?,
            },
        }
        if had_newline {
            writer.write_char('\n')?;
        }
        Ok(())
    }
}

/// The trace id of the span the event is logged in.
///
/// `tracing-opentelemetry` attaches a span's OpenTelemetry context to the thread when the span
/// is entered, so the thread's current context is the event's span. (The dispatcher cannot be
/// asked instead: it is not re-entrant while it dispatches this event.) Events with an explicit
/// parent are logged without a trace id unless that parent is also the current span.
fn event_trace_id<S, N>(ctx: &FmtContext<'_, S, N>, event: &Event<'_>) -> Option<TraceId>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    let current = ctx.lookup_current()?.id();
    if event.parent().is_some_and(|parent| *parent != current) {
        return None;
    }
    let cx = opentelemetry::Context::current();
    let span_context = cx.span().span_context().clone();
    span_context.is_valid().then(|| span_context.trace_id())
}
