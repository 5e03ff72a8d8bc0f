//! Glue between the framework and the framework-agnostic controller logic: the informer store as
//! a lister, the framework's recorder as an event sink, and controller errors as queue outcomes.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use controller_manager::controller::RetryAfter;
use controller_manager::events::EventRecorder;
use controller_manager::informer::Store;
use k8s_openapi::api::core::v1::{Node, ObjectReference};

use crate::event_sink::{EventSink, EventType};
use crate::node::NodeLister;

/// How long one reconcile may run before it is abandoned and retried with backoff; generous, so
/// only a hung cloud call trips it.
pub const RECONCILE_TIMEOUT: Duration = Duration::from_secs(600);

impl NodeLister for Store<Node> {
    fn get(&self, name: &str) -> Option<Arc<Node>> {
        self.get_by_name(name)
    }
    fn list(&self) -> Vec<Arc<Node>> {
        Store::list(self)
    }
}

/// The framework's aggregating recorder behind the controllers' [`EventSink`].
pub struct RecorderSink(pub EventRecorder);

impl EventSink for RecorderSink {
    fn emit(&self, regarding: &ObjectReference, type_: EventType, reason: &str, message: &str) {
        self.0.event(regarding, type_, reason, message);
    }
}

/// Turns a controller error into what the work queue understands: a cloud `Retry { after }`
/// becomes [`RetryAfter`] (requeue after exactly that delay), anything else backs off per key.
pub fn queue_error<E>(err: E, retry_after: Option<Duration>) -> Box<dyn Error + Send + Sync>
where
    E: Error + Send + Sync + 'static,
{
    match retry_after {
        Some(after) => Box::new(RetryAfter::new(after, err.to_string())),
        None => Box::new(err),
    }
}
