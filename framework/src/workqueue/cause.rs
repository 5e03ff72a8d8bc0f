//! Why a key is handed out: the kind of the add that queued it and the trace contexts of every add
//! it absorbed, so a reconcile's root span can link back to the watch events and requeues that
//! caused it (a level-triggered queue has no single cause).
//!
//! Each add opens a short `enqueue` span (a child of whatever span is current: an event handler's,
//! a reconcile that enqueues other keys, or none, which makes it a root) and keeps its span
//! context with the key. A key added again while it waits is not queued twice (deduplication),
//! but its context is appended, up to [`MAX_LINKS`]: the reconcile then carries one link per cause.
//! Adds past the cap are only counted ([`Cause::adds`]), so a key re-added by a storm of events
//! cannot grow without bound. When no OpenTelemetry layer is installed the contexts are invalid
//! and nothing is kept.

use std::fmt::{self, Debug};

use opentelemetry::trace::{SpanContext, TraceContextExt};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// How many enqueue links one hand-out keeps; later adds are counted but not linked. 16 covers
/// the adds a key realistically absorbs while it waits, far below OpenTelemetry's 128-link limit.
pub const MAX_LINKS: usize = 16;

/// Which queue operation put a key in the queue, so a trace says why a reconcile ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AddReason {
    /// `add`: an event handler (or another controller) reported a change.
    #[default]
    Add,
    /// `add_after`: a delay asked for by a reconcile (`RequeueAfter`, `RetryAfter`) or a caller.
    AddAfter,
    /// `add_rate_limited`: a retry after a failed reconcile, delayed by the rate limiter.
    RateLimited,
    /// `add_low_priority`: a re-verification of what the cache re-delivered (initial list,
    /// relist, resync), handed out after every normal key.
    LowPriority,
    /// No queue operation: a pass of a periodic loop (`controller::Periodic`), on its schedule.
    Periodic,
}

impl AddReason {
    /// The value of the `reason` span attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            AddReason::Add => "add",
            AddReason::AddAfter => "add_after",
            AddReason::RateLimited => "rate_limited",
            AddReason::LowPriority => "low_priority",
            AddReason::Periodic => "periodic",
        }
    }
}

impl fmt::Display for AddReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a worker learns about a key besides the key itself: why it was queued and by whom.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cause {
    /// The operation of the first add since the key was last handed out; later adds of the same
    /// key were deduplicated into this hand-out.
    pub reason: AddReason,
    /// Span contexts of the `enqueue` spans of the adds this hand-out absorbed, oldest first, at
    /// most [`MAX_LINKS`].
    pub links: Vec<SpanContext>,
    /// How many adds this hand-out absorbed (also those past the link cap, and those made while
    /// tracing was off). Zero only for a `Cause::default()` made outside the queue.
    pub adds: u32,
}

impl Cause {
    /// The cause of one add.
    pub(super) fn new(reason: AddReason, link: Option<SpanContext>) -> Self {
        Cause {
            reason,
            links: link.into_iter().collect(),
            adds: 1,
        }
    }

    /// Folds a deduplicated add into this cause: the first reason stays, the link is kept if
    /// there is room.
    pub(super) fn absorb(&mut self, other: Cause) {
        self.adds = self.adds.saturating_add(other.adds);
        let room = MAX_LINKS.saturating_sub(self.links.len());
        self.links.extend(other.links.into_iter().take(room));
    }
}

/// Opens and closes the `enqueue` span of one add and returns its context, or `None` when the
/// span is not recorded by an OpenTelemetry layer (no subscriber, filtered out, no OTel layer).
pub(super) fn enqueue_span(queue: &str, key: &dyn Debug, reason: AddReason) -> Option<SpanContext> {
    let span = tracing::info_span!(
        "enqueue",
        otel.kind = "producer",
        queue = queue,
        key = ?key,
        reason = reason.as_str(),
    );
    if span.is_disabled() {
        return None;
    }
    let context = span.context().span().span_context().clone();
    context.is_valid().then_some(context)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};

    use super::*;
    use crate::workqueue::{ItemExponential, WorkQueue};

    fn link(n: u8) -> SpanContext {
        SpanContext::new(
            TraceId::from_bytes([n; 16]),
            SpanId::from_bytes([n; 8]),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        )
    }

    #[test]
    fn absorb_keeps_first_reason_and_caps_links_but_counts_every_add() {
        let mut cause = Cause::new(AddReason::RateLimited, Some(link(1)));
        for n in 2..=40 {
            cause.absorb(Cause::new(AddReason::Add, Some(link(n))));
        }
        cause.absorb(Cause::new(AddReason::Add, None));
        assert_eq!(cause.reason, AddReason::RateLimited);
        assert_eq!(cause.adds, 41);
        assert_eq!(cause.links.len(), MAX_LINKS);
        assert_eq!(cause.links[0], link(1), "oldest links are kept");
        assert_eq!(cause.links[MAX_LINKS - 1], link(MAX_LINKS as u8));
    }

    fn trace_of(span: &tracing::Span) -> opentelemetry::trace::TraceId {
        span.context().span().span_context().trace_id()
    }

    #[tokio::test(start_paused = true)]
    async fn a_deduplicated_key_carries_one_link_per_add_and_the_first_reason() {
        use opentelemetry::trace::TracerProvider as _;
        use tracing_subscriber::layer::SubscriberExt;

        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        let _guard = tracing::subscriber::set_default(subscriber);
        // Callsites first seen by a test thread without a subscriber cached `never`.
        tracing::callsite::rebuild_interest_cache();
        let queue = WorkQueue::new(
            "q",
            ItemExponential::new(Duration::from_secs(1), Duration::from_secs(10)),
        );

        // Two watch events for the same key while it waits, one of them inside a handler span.
        let event = tracing::info_span!("watch event");
        event.in_scope(|| queue.add("a"));
        queue.add("a");
        let (key, cause) = queue.get_with_cause().await.expect("key");
        assert_eq!(key, "a");
        assert_eq!(cause.reason, AddReason::Add);
        assert_eq!(cause.adds, 2);
        assert_eq!(cause.links.len(), 2);
        assert_eq!(
            cause.links[0].trace_id(),
            trace_of(&event),
            "enqueue is a child of the event"
        );
        assert_ne!(
            cause.links[1].trace_id(),
            trace_of(&event),
            "an add outside any span is a root"
        );

        // Added while processing: handed out again after done, with only the new cause.
        let reconcile = tracing::info_span!("reconcile");
        reconcile.in_scope(|| queue.add_rate_limited("a"));
        queue.done(&"a");
        let (_, cause) = queue.get_with_cause().await.expect("retry");
        assert_eq!(cause.reason, AddReason::RateLimited);
        assert_eq!((cause.adds, cause.links.len()), (1, 1));
        assert_eq!(cause.links[0].trace_id(), trace_of(&reconcile));
        queue.done(&"a");

        // Delayed adds keep their causes until promoted, the earlier one deciding the time.
        queue.add_after("b", Duration::from_secs(5));
        queue.add_after("b", Duration::from_secs(2));
        queue.add("b");
        let (_, cause) = queue.get_with_cause().await.expect("b");
        assert_eq!(
            cause.reason,
            AddReason::Add,
            "the plain add queued it first"
        );
        assert_eq!(cause.adds, 1, "the delayed adds are still waiting");
        queue.done(&"b");
        let (_, cause) = queue.get_with_cause().await.expect("b after delay");
        assert_eq!(cause.reason, AddReason::AddAfter);
        assert_eq!((cause.adds, cause.links.len()), (2, 2));
    }
}
