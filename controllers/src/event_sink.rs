//! Where controllers send Kubernetes events, kept as a trait so controller logic does not depend on
//! how events are written (the framework's aggregating recorder in production, a vector in tests).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, ObjectReference};
use parking_lot::Mutex;

/// Severity of an event: the framework's type, so sinks pass it to the recorder unchanged.
pub use controller_manager::events::EventType;

/// Receives events; implementations must never block or fail the caller.
pub trait EventSink: Send + Sync {
    /// Records `reason`/`message` about `regarding`.
    fn emit(&self, regarding: &ObjectReference, type_: EventType, reason: &str, message: &str);
}

/// The reference events about a Node point at (cluster-scoped, so they land in `default`).
pub fn node_reference(node: &Node) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: node.metadata.name.clone(),
        uid: node.metadata.uid.clone(),
        ..Default::default()
    }
}

/// One event captured by [`RecordedEvents`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedEvent {
    /// `namespace/name` or `name` of the object the event is about.
    pub object: String,
    /// Normal or Warning.
    pub type_: EventType,
    /// The upstream reason, e.g. `EnsuredLoadBalancer`.
    pub reason: String,
    /// Human-readable text.
    pub message: String,
}

/// An in-memory sink, so tests can assert on the exact reasons a controller emitted.
#[derive(Clone, Default)]
pub struct RecordedEvents(Arc<Mutex<Vec<RecordedEvent>>>);

impl RecordedEvents {
    /// Everything emitted so far, in order.
    pub fn all(&self) -> Vec<RecordedEvent> {
        self.0.lock().clone()
    }

    /// The reasons emitted so far, in order.
    pub fn reasons(&self) -> Vec<String> {
        self.0.lock().iter().map(|e| e.reason.clone()).collect()
    }
}

impl EventSink for RecordedEvents {
    fn emit(&self, regarding: &ObjectReference, type_: EventType, reason: &str, message: &str) {
        let name = regarding.name.clone().unwrap_or_default();
        let object = match &regarding.namespace {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
            _ => name,
        };
        self.0.lock().push(RecordedEvent {
            object,
            type_,
            reason: reason.to_string(),
            message: message.to_string(),
        });
    }
}
