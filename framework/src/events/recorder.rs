//! The recorder handle controllers hold, its bounded queue, and the single background task that
//! correlates and writes events (client-go's broadcaster + `recordToSink`).
//!
//! Difference from client-go: an event identical to one still waiting in the queue (same source,
//! object, type, reason and message) takes no queue slot; it raises the waiting one's count, so
//! a burst of repeats is one API write with `count = n` instead of n writes, and cannot crowd
//! other events out of the queue. Only distinct events can fill it; those are dropped and
//! counted (`events_dropped_total`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{debug, error, warn};

use super::EventType;
use super::correlator::{Correlation, EventCorrelator, event_key};
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
    /// An event and its key in [`Pending`].
    Event(Box<Event>, String),
    Flush(oneshot::Sender<()>),
}

/// Repeats of an event waiting in the queue: how many, and when the last one happened.
struct Repeats {
    count: i32,
    last: Timestamp,
}

/// Event key → repeats of the event with that key waiting in the queue; at most one entry per
/// queued event, so bounded by the queue.
type Pending = Arc<Mutex<HashMap<String, Repeats>>>;

/// Records events about objects without ever blocking or failing the caller: a full queue drops the
/// event (counted), API trouble is retried in the background. Cheap to clone; all clones and
/// [`EventRecorder::for_component`] recorders share one queue and one correlator.
#[derive(Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<Item>,
    pending: Pending,
    source: EventSource,
    counters: EventCounters,
}

/// What a recorder loses, counted: shared by every recorder of one component in a process, so
/// the component's figures on `/metrics` are one series however many recorders it has.
#[derive(Clone, Debug, Default)]
pub(crate) struct EventCounters {
    dropped: Counter,
    spam_filtered: Counter,
}

impl EventCounters {
    /// Registers `events_dropped_total` and `events_spam_filtered_total` labelled
    /// `component=<component>`.
    pub(crate) fn register(&self, component: &str, registry: &mut Registry) {
        let sub =
            registry.sub_registry_with_label(("component".into(), component.to_string().into()));
        sub.register(
            "events_dropped",
            "Events lost: the recorder's queue (1000 distinct events) was full, the server rejected them, or 12 write attempts failed.",
            self.dropped.clone(),
        );
        sub.register(
            "events_spam_filtered",
            "Events not written because the spam filter (25 per object, then one per 5 minutes) held them back.",
            self.spam_filtered.clone(),
        );
    }
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
        Self::counted(client, component, host, EventCounters::default())
    }

    /// As [`Self::new`], counting into `counters`.
    pub(crate) fn counted(
        client: kube::Client,
        component: &str,
        host: Option<String>,
        counters: EventCounters,
    ) -> Self {
        Self::with_writer(
            Arc::new(KubeEventWriter::new(client)),
            component,
            host,
            counters,
        )
    }

    pub(crate) fn with_writer(
        writer: Arc<dyn EventWriter>,
        component: &str,
        host: Option<String>,
        counters: EventCounters,
    ) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_SIZE);
        let pending = Pending::default();
        tokio::spawn(write_loop(
            rx,
            writer,
            pending.clone(),
            counters.dropped.clone(),
            counters.spam_filtered.clone(),
        ));
        Self {
            tx,
            pending,
            source: EventSource {
                component: Some(component.to_string()),
                host,
            },
            counters,
        }
    }

    /// A recorder for another component (e.g. one per controller, as upstream) sharing this one's
    /// queue, writer task and caches.
    pub fn for_component(&self, component: &str) -> Self {
        Self {
            tx: self.tx.clone(),
            pending: self.pending.clone(),
            source: EventSource {
                component: Some(component.to_string()),
                host: self.source.host.clone(),
            },
            counters: self.counters.clone(),
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
        let now = Timestamp::now();
        let event = make_event(&self.source, object, type_, reason, message, now);
        let key = event_key(&event);
        let mut pending = self.pending.lock();
        if let Some(repeats) = pending.get_mut(&key) {
            repeats.count = repeats.count.saturating_add(1);
            repeats.last = now;
            return;
        }
        // Sent under the lock, so the writer cannot take the item before its entry exists.
        match self.tx.try_send(Item::Event(Box::new(event), key.clone())) {
            Ok(()) => {
                pending.insert(
                    key,
                    Repeats {
                        count: 1,
                        last: now,
                    },
                );
            }
            Err(_) => {
                self.counters.dropped.inc();
                warn!(reason, "event queue full or closed; dropping event");
            }
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

    /// Events lost since start: the queue was full, the server rejected them, or writing still
    /// failed after 12 attempts.
    pub fn dropped(&self) -> u64 {
        self.counters.dropped.get()
    }

    /// Events the spam filter (client-go's: 25 per object, then one per 5 minutes) did not
    /// write, since start.
    pub fn spam_filtered(&self) -> u64 {
        self.counters.spam_filtered.get()
    }

    /// Registers `events_dropped_total` and `events_spam_filtered_total` labelled
    /// `component="<this recorder's component>"`, for a recorder made outside a manager
    /// (recorders from `InitContext::event_recorder` are registered already; register each
    /// component once per registry).
    pub fn register_metrics(&self, registry: &mut Registry) {
        let component = self.source.component.clone().unwrap_or_default();
        self.counters.register(&component, registry);
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

async fn write_loop(
    mut rx: mpsc::Receiver<Item>,
    writer: Arc<dyn EventWriter>,
    pending: Pending,
    dropped: Counter,
    spam_filtered: Counter,
) {
    let mut correlator = EventCorrelator::default();
    while let Some(item) = rx.recv().await {
        match item {
            Item::Flush(ack) => {
                let _ = ack.send(());
            }
            Item::Event(mut event, key) => {
                // From here on, a repeat queues a new item (and is counted on top of this one).
                if let Some(repeats) = pending.lock().remove(&key) {
                    event.count = Some(repeats.count);
                    event.last_timestamp = Some(Time(repeats.last));
                }
                let occurrences = u64::try_from(event.count.unwrap_or(1)).unwrap_or(1);
                match record_to_sink(writer.as_ref(), &mut correlator, *event).await {
                    Outcome::Written => {}
                    Outcome::SpamFiltered => {
                        spam_filtered.inc_by(occurrences);
                    }
                    Outcome::Lost => {
                        dropped.inc_by(occurrences);
                    }
                }
            }
        }
    }
}

/// What became of one event in the writer.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Written (or already there).
    Written,
    /// Held back by the spam filter.
    SpamFiltered,
    /// Rejected by the server, or still failing after [`MAX_TRIES`] attempts.
    Lost,
}

/// client-go `recordToSink`: correlate, then write with up to [`MAX_TRIES`] attempts.
async fn record_to_sink(
    writer: &dyn EventWriter,
    correlator: &mut EventCorrelator,
    event: Event,
) -> Outcome {
    let (mut event, patch) = match correlator.correlate(event, Instant::now(), Timestamp::now()) {
        Correlation::Skip => {
            debug!("event dropped by the spam filter");
            return Outcome::SpamFiltered;
        }
        Correlation::Create(event) => (event, None),
        Correlation::Patch { event, patch } => (event, Some(patch)),
    };
    for attempt in 1..=MAX_TRIES {
        match write_once(writer, &mut event, patch.as_ref()).await {
            Ok(written) => {
                correlator.update_state(&written);
                return Outcome::Written;
            }
            Err(e) if !retryable(&e) => {
                if is_benign(&e) {
                    debug!(error = %e, "event not written");
                    return Outcome::Written;
                }
                error!(error = %e, reason = ?event.reason, "server rejected event (will not retry!)");
                return Outcome::Lost;
            }
            Err(e) => {
                warn!(error = %e, attempt, "unable to write event (may retry after sleeping)")
            }
        }
        if attempt == MAX_TRIES {
            error!(reason = ?event.reason, "unable to write event (retry limit exceeded!)");
            return Outcome::Lost;
        }
        // Randomise the first wait so clients do not retry in lockstep after an API outage.
        let wait = if attempt == 1 {
            RETRY_SLEEP.mul_f64(rand::random::<f64>())
        } else {
            RETRY_SLEEP
        };
        tokio::time::sleep(wait).await;
    }
    Outcome::Lost
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
