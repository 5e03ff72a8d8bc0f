//! The trace layer inside a running controller, under an OpenTelemetry subscriber: reconcile spans
//! are roots linked to the adds that caused them, and a retry links to the reconcile that failed.

use std::time::Duration;

use opentelemetry::trace::{SpanContext, TraceContextExt, TracerProvider as _};
use tokio::sync::mpsc::unbounded_channel;
use tokio_util::sync::CancellationToken;
use tower::{BoxError, Layer, service_fn};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

use super::TraceLayer;
use crate::controller::{Action, Controller, Request};
use crate::workqueue::{AddReason, Cause, ItemExponential, WorkQueue};

/// What one reconcile saw: its own span context and the cause it was handed.
type Seen = (SpanContext, Cause);

#[tokio::test(start_paused = true)]
async fn a_retry_links_to_the_failed_reconcile_and_the_first_run_to_its_add() {
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let _guard = tracing::subscriber::set_default(subscriber);
    // Callsites first seen by a test thread without a subscriber cached `never`.
    tracing::callsite::rebuild_interest_cache();

    let (tx, mut rx) = unbounded_channel::<Seen>();
    let reconciler = service_fn(move |req: Request<&'static str>| {
        let own = tracing::Span::current()
            .context()
            .span()
            .span_context()
            .clone();
        let _ = tx.send((own, req.cause.clone()));
        async move {
            match req.attempt {
                0 => Err::<Action, BoxError>("cloud said no".into()),
                _ => Ok(Action::Done),
            }
        }
    });
    let queue = WorkQueue::new(
        "lane",
        ItemExponential::new(Duration::from_millis(5), Duration::from_secs(1)),
    );
    let handler_span = tracing::info_span!("watch event");
    handler_span.in_scope(|| queue.add("k"));
    let controller = Controller::new("c", queue, TraceLayer::new().layer(reconciler));
    let token = CancellationToken::new();
    let running = tokio::spawn(controller.run(token.clone()));

    let (first, cause) = rx.recv().await.expect("first attempt");
    assert_eq!(cause.reason, AddReason::Add);
    assert_eq!(cause.links.len(), 1);
    let handler_trace = handler_span.context().span().span_context().trace_id();
    assert_eq!(
        cause.links[0].trace_id(),
        handler_trace,
        "linked to the event's trace"
    );
    assert_ne!(
        first.trace_id(),
        handler_trace,
        "the reconcile is a root of its own trace"
    );

    let (second, cause) = rx.recv().await.expect("retry");
    assert_eq!(cause.reason, AddReason::RateLimited);
    assert_eq!(cause.links.len(), 1);
    assert_eq!(
        cause.links[0].trace_id(),
        first.trace_id(),
        "the retry's enqueue span sits in the failed reconcile's trace"
    );
    assert_ne!(
        second.trace_id(),
        first.trace_id(),
        "each attempt is its own trace"
    );

    token.cancel();
    running.await.expect("controller");
}
