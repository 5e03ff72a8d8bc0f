//! The recorder handle controllers hold, its bounded queue, and the single background task that
//! correlates and writes events (client-go's broadcaster + `recordToSink`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{debug, error, warn};

use super::EventType;
use super::correlator::{Correlation, EventCorrelator};
use super::writer::{EventWriter, KubeEventWriter};

/// `maxQueuedEvents`: events waiting to be written before new ones are dropped.
pub(crate) const QUEUE_SIZE: usize = 1000;
/// `maxTriesPerEvent`.
pub(crate) const MAX_TRIES: u32 = 12;
/// `defaultSleepDuration` between write attempts (the first wait is randomised in `[0, 10 s)`).
pub(crate) const RETRY_SLEEP: Duration = Duration::from_secs(10);
/// Namespace for events about cluster-scoped objects such as Nodes.
const DEFAULT_NAMESPACE: &str = "default";

enum Item {
    Event(Box<Event>),
    Flush(oneshot::Sender<()>),
}

/// Records events about objects without ever blocking or failing the caller: a full queue drops the
/// event (counted), API trouble is retried in the background. Cheap to clone; all clones and
/// [`EventRecorder::for_component`] recorders share one queue and one correlator.
#[derive(Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<Item>,
    source: EventSource,
    dropped: Counter,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// Starts the writer task and returns a recorder whose events carry `source.component =
    /// component` and `source.host = host`.
    ///
    /// # Panics
    /// Outside a Tokio runtime (the writer task is spawned here).
    pub fn new(client: kube::Client, component: &str, host: Option<String>) -> Self {
        Self::with_writer(Arc::new(KubeEventWriter::new(client)), component, host)
    }

    pub(crate) fn with_writer(
        writer: Arc<dyn EventWriter>,
        component: &str,
        host: Option<String>,
    ) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_SIZE);
        tokio::spawn(write_loop(rx, writer));
        Self {
            tx,
            source: EventSource {
                component: Some(component.to_string()),
                host,
            },
            dropped: Counter::default(),
        }
    }

    /// A recorder for another component (e.g. one per controller, as upstream) sharing this one's
    /// queue, writer task and caches.
    pub fn for_component(&self, component: &str) -> Self {
        Self {
            tx: self.tx.clone(),
            source: EventSource {
                component: Some(component.to_string()),
                host: self.source.host.clone(),
            },
            dropped: self.dropped.clone(),
        }
    }

    /// Records `reason`/`message` about `object`; returns at once. The event goes to the object's
    /// namespace, or `default` for cluster-scoped objects.
    pub fn event(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let message = message.into();
        debug!(
            object = object.name.as_deref().unwrap_or(""),
            kind = object.kind.as_deref().unwrap_or(""),
            type_ = type_.as_str(),
            reason,
            message = %message,
            "event"
        );
        let event = make_event(
            &self.source,
            object,
            type_,
            reason,
            message,
            Timestamp::now(),
        );
        if self.tx.try_send(Item::Event(Box::new(event))).is_err() {
            self.dropped.inc();
            warn!(reason, "event queue full or closed; dropping event");
        }
    }

    /// Waits until every event recorded before this call has been written (or given up on), e.g.
    /// before the process exits.
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.tx.send(Item::Flush(ack)).await.is_ok() {
            let _ = done.await;
        }
    }

    /// Events dropped because the queue was full, since start.
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    /// Registers `events_dropped_total`, so a full event queue is visible on `/metrics`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "events_dropped",
            "Events dropped because the recorder's queue (1000) was full.",
            self.dropped.clone(),
        );
    }
}

/// client-go `makeEvent`.
fn make_event(
    source: &EventSource,
    object: &ObjectReference,
    type_: EventType,
    reason: &str,
    message: String,
    now: Timestamp,
) -> Event {
    let namespace = object
        .namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let name = object.name.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: Some(namespace),
            ..ObjectMeta::default()
        },
        involved_object: object.clone(),
        reason: Some(reason.to_string()),
        message: Some(message),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        type_: Some(type_.as_str().to_string()),
        source: Some(source.clone()),
        reporting_component: source.component.clone(),
        reporting_instance: source.host.clone(),
        ..Event::default()
    }
}

async fn write_loop(mut rx: mpsc::Receiver<Item>, writer: Arc<dyn EventWriter>) {
    let mut correlator = EventCorrelator::default();
    while let Some(item) = rx.recv().await {
        match item {
            Item::Flush(ack) => {
                let _ = ack.send(());
            }
            Item::Event(event) => record_to_sink(writer.as_ref(), &mut correlator, *event).await,
        }
    }
}

/// client-go `recordToSink`: correlate, then write with up to [`MAX_TRIES`] attempts.
async fn record_to_sink(writer: &dyn EventWriter, correlator: &mut EventCorrelator, event: Event) {
    let (mut event, patch) = match correlator.correlate(event, Instant::now(), Timestamp::now()) {
        Correlation::Skip => {
            debug!("event dropped by the spam filter");
            return;
        }
        Correlation::Create(event) => (event, None),
        Correlation::Patch { event, patch } => (event, Some(patch)),
    };
    for attempt in 1..=MAX_TRIES {
        match write_once(writer, &mut event, patch.as_ref()).await {
            Ok(written) => {
                correlator.update_state(&written);
                return;
            }
            Err(e) if !retryable(&e) => {
                if is_benign(&e) {
                    debug!(error = %e, "event not written");
                } else {
                    error!(error = %e, reason = ?event.reason, "server rejected event (will not retry!)");
                }
                return;
            }
            Err(e) => {
                warn!(error = %e, attempt, "unable to write event (may retry after sleeping)")
            }
        }
        if attempt == MAX_TRIES {
            error!(reason = ?event.reason, "unable to write event (retry limit exceeded!)");
            return;
        }
        // Randomise the first wait so clients do not retry in lockstep after an API outage.
        let wait = if attempt == 1 {
            RETRY_SLEEP.mul_f64(rand::random::<f64>())
        } else {
            RETRY_SLEEP
        };
        tokio::time::sleep(wait).await;
    }
}

/// client-go `recordEvent`: patch a repeat; create a new event, or a repeat whose event is gone.
async fn write_once(
    writer: &dyn EventWriter,
    event: &mut Event,
    patch: Option<&serde_json::Value>,
) -> Result<Event, kube::Error> {
    if let Some(patch) = patch {
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        match writer.patch(namespace, name, patch.clone()).await {
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            other => return other,
        }
    }
    event.metadata.resource_version = None;
    writer.create(event.clone()).await
}

/// Transport failures, throttling and server errors are worth another attempt; a rejected request
/// is not.
fn retryable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::SerdeError(_) | kube::Error::BuildRequest(_) => false,
        _ => true,
    }
}

/// Races upstream also ignores: the event already exists, or its namespace is being deleted.
fn is_benign(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => {
            s.is_already_exists()
                || s.details
                    .as_ref()
                    .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "recorder_tests.rs"]
mod tests;
