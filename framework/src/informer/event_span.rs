//! Owns the `watch event` span: one per event the informer delivers, made where the object type
//! is known and entered around every handler's `on_event`, so the `enqueue` span a handler opens
//! is its child and a reconcile's link leads back to the event that caused it.
//!
//! The span is INFO, so it reaches a trace backend at the default verbosity together with the
//! `enqueue` and `reconcile` spans it explains. It is always a root (`parent: None`): a late
//! registration made inside some other span must not adopt the replayed events. One span serves
//! every handler of an event (each notification carries a clone, a reference count); it closes
//! when the last handler has run. With tracing off the macro returns a disabled span without
//! evaluating any field, so the cost is one level check per event.

use tracing::Span;

use super::event::Event;
use super::object::Object;
use super::source::EventSource;

/// The span's `event.type`: `added`, `updated` or `deleted` as the handler sees the event, and
/// `resync` for a resync's `Updated { old == new }`.
fn event_type<K: ?Sized>(source: EventSource, event: &Event<K>) -> &'static str {
    match (source, event) {
        (EventSource::Resync, _) => "resync",
        (_, Event::Added(_)) => "added",
        (_, Event::Updated { .. }) => "updated",
        (_, Event::Deleted(_)) => "deleted",
    }
}

/// Opens the `watch event` span of one event of `kind` (the informer's kind label).
pub(crate) fn event_span(kind: &str, source: EventSource, event: &Event<dyn Object>) -> Span {
    let obj = event.object();
    tracing::info_span!(
        parent: None,
        "watch event",
        "k8s.kind" = kind,
        "event.type" = event_type(source, event),
        "event.source" = source.as_str(),
        "object.ref" = %obj.key(),
        "k8s.resource_version" = obj.resource_version().unwrap_or(""),
    )
}
