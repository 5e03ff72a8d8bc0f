//! The recorder handle controllers hold, the buffer of events waiting to be written, and the
//! single background task that correlates and writes them (client-go's broadcaster +
//! `recordToSink`).
//!
//! Differences from client-go, whose queue holds 1,000 events and drops the next when full
//! ("event queue full or closed; dropping event", seen at 1,000 load balancers):
//! - the buffer is bounded in bytes ([`BUFFER_BYTES`]), not in events: tens of thousands of
//!   ordinary events wait to be written at the API server's pace instead of being dropped, and
//!   recording never blocks;
//! - an event identical to one still waiting (same source, object, type, reason and message)
//!   takes no room: it raises the waiting one's count, so a burst of repeats is one API write
//!   with `count = n`.
//!
//! Only what would pass the byte bound is dropped and counted (`events_dropped_total`), with the
//! events the server rejected or that failed every write attempt.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tracing::{debug, error, warn};

use super::EventType;
use super::correlator::{Correlation, EventCorrelator, event_key};
use super::writer::{EventWriter, KubeEventWriter};

/// How many bytes of distinct events may wait to be written (about 10,000 typical events)
/// before new ones are dropped.
pub(crate) const BUFFER_BYTES: usize = 8 << 20;
/// What an event costs the buffer beyond its strings: the struct, its key and bookkeeping.
const EVENT_OVERHEAD_BYTES: usize = 512;
/// `maxTriesPerEvent`.
pub(crate) const MAX_TRIES: u32 = 12;
/// `defaultSleepDuration` between write attempts (the first wait is randomised in `[0, 10 s)`).
pub(crate) const RETRY_SLEEP: Duration = Duration::from_secs(10);
/// Namespace for events about cluster-scoped objects such as Nodes.
const DEFAULT_NAMESPACE: &str = "default";

/// An event waiting to be written, with the repeats recorded since it was queued.
struct Waiting {
    event: Box<Event>,
    count: i32,
    last: Timestamp,
    bytes: usize,
    seq: u64,
}

#[derive(Default)]
struct State {
    /// Keys of the waiting events, oldest first.
    order: VecDeque<String>,
    waiting: HashMap<String, Waiting>,
    bytes: usize,
    /// Sequence number of the last event queued.
    queued: u64,
    /// Every recorder is gone: the writer ends once the buffer is empty.
    closed: bool,
}

/// What the recorders and the writer share.
struct Buffer {
    state: Mutex<State>,
    wake: Notify,
    /// Sequence number of the last event the writer is done with (written or given up on).
    done: watch::Sender<u64>,
}

/// Closes the buffer when the last recorder goes.
struct Handle(Arc<Buffer>);

impl Drop for Handle {
    fn drop(&mut self) {
        self.0.state.lock().closed = true;
        self.0.wake.notify_one();
    }
}

/// Records events about objects without ever blocking or failing the caller: events wait in a
/// buffer bounded in bytes, and API trouble is retried in the background. Cheap to clone; all
/// clones and [`EventRecorder::for_component`] recorders share one buffer and one correlator.
#[derive(Clone)]
pub struct EventRecorder {
    handle: Arc<Handle>,
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
            "Events lost: the recorder's buffer (8 MiB of distinct events) was full, the server rejected them, or 12 write attempts failed",
            self.dropped.clone(),
        );
        sub.register(
            "events_spam_filtered",
            "Events not written because the spam filter (25 per object, then one per 5 minutes) held them back",
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
        let buffer = Arc::new(Buffer {
            state: Mutex::default(),
            wake: Notify::new(),
            done: watch::Sender::new(0),
        });
        tokio::spawn(write_loop(
            buffer.clone(),
            writer,
            counters.dropped.clone(),
            counters.spam_filtered.clone(),
        ));
        Self {
            handle: Arc::new(Handle(buffer)),
            source: EventSource {
                component: Some(component.to_string()),
                host,
            },
            counters,
        }
    }

    /// A recorder for another component (e.g. one per controller, as upstream) sharing this one's
    /// buffer, writer task and caches.
    pub fn for_component(&self, component: &str) -> Self {
        Self {
            handle: self.handle.clone(),
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
        let buffer = &self.handle.0;
        let mut state = buffer.state.lock();
        if let Some(waiting) = state.waiting.get_mut(&key) {
            waiting.count = waiting.count.saturating_add(1);
            waiting.last = now;
            return;
        }
        let bytes = event_bytes(&event);
        if state.bytes + bytes > BUFFER_BYTES {
            drop(state);
            self.counters.dropped.inc();
            warn!(
                reason,
                "event buffer full ({BUFFER_BYTES} bytes waiting); dropping event"
            );
            return;
        }
        state.queued += 1;
        let seq = state.queued;
        state.bytes += bytes;
        state.order.push_back(key.clone());
        state.waiting.insert(
            key,
            Waiting {
                event: Box::new(event),
                count: 1,
                last: now,
                bytes,
                seq,
            },
        );
        drop(state);
        buffer.wake.notify_one();
    }

    /// Waits until every event recorded before this call has been written (or given up on), e.g.
    /// before the process exits.
    pub async fn flush(&self) {
        self.unwritten().flush().await;
    }

    /// [`Self::flush`] for at most `deadline`; what is still waiting then is given up on and
    /// counted as dropped. Returns how many events that was.
    pub async fn flush_within(&self, deadline: Duration) -> usize {
        self.unwritten().flush_within(deadline).await
    }

    /// What a manager keeps to flush this recorder's buffer at shutdown without keeping the
    /// recorder itself (and so its writer task) alive.
    pub(crate) fn unwritten(&self) -> Unwritten {
        Unwritten {
            buffer: self.handle.0.clone(),
            dropped: self.counters.dropped.clone(),
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

/// A recorder's buffer seen from outside: flushed by the manager at shutdown. Holding it keeps
/// the buffer but not the recorder: the buffer still closes when the last recorder goes.
#[derive(Clone)]
pub(crate) struct Unwritten {
    buffer: Arc<Buffer>,
    dropped: Counter,
}

impl Unwritten {
    async fn flush(&self) {
        let target = self.buffer.state.lock().queued;
        let mut done = self.buffer.done.subscribe();
        // `done`'s sender lives in the buffer this holds, so this waits for the writer.
        let _ = done.wait_for(|seq| *seq >= target).await;
    }

    /// See [`EventRecorder::flush_within`].
    pub(crate) async fn flush_within(&self, deadline: Duration) -> usize {
        if tokio::time::timeout(deadline, self.flush()).await.is_ok() {
            return 0;
        }
        let mut state = self.buffer.state.lock();
        let lost: u64 = state
            .waiting
            .values()
            .map(|w| u64::try_from(w.count).unwrap_or(1))
            .sum();
        let events = state.order.len();
        state.order.clear();
        state.waiting.clear();
        state.bytes = 0;
        let queued = state.queued;
        drop(state);
        // Later flushes wait only for what is recorded after this one.
        self.buffer
            .done
            .send_modify(|done| *done = (*done).max(queued));
        self.dropped.inc_by(lost);
        if events > 0 {
            warn!(
                events,
                ?deadline,
                "events not written before the flush deadline; dropping them"
            );
        }
        events
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

/// What an event costs the buffer: its strings plus a fixed overhead.
fn event_bytes(event: &Event) -> usize {
    let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let object = &event.involved_object;
    EVENT_OVERHEAD_BYTES
        + text(&event.metadata.name)
        + text(&event.metadata.namespace)
        + text(&event.reason)
        + text(&event.message)
        + text(&object.kind)
        + text(&object.name)
        + text(&object.namespace)
        + text(&object.uid)
        + text(&object.api_version)
        + text(&object.resource_version)
        + text(&object.field_path)
        + event
            .source
            .as_ref()
            .map_or(0, |s| text(&s.component) + text(&s.host))
}

async fn write_loop(
    buffer: Arc<Buffer>,
    writer: Arc<dyn EventWriter>,
    dropped: Counter,
    spam_filtered: Counter,
) {
    let mut correlator = EventCorrelator::default();
    loop {
        let next = {
            let mut state = buffer.state.lock();
            match state.order.pop_front() {
                Some(key) => {
                    let waiting = state.waiting.remove(&key);
                    if let Some(w) = &waiting {
                        state.bytes -= w.bytes;
                    }
                    waiting
                }
                None if state.closed => return,
                None => None,
            }
        };
        let Some(waiting) = next else {
            buffer.wake.notified().await;
            continue;
        };
        // From here on, a repeat queues a new event (and is counted on top of this one).
        let mut event = *waiting.event;
        event.count = Some(waiting.count);
        event.last_timestamp = Some(Time(waiting.last));
        let occurrences = u64::try_from(waiting.count).unwrap_or(1);
        match record_to_sink(writer.as_ref(), &mut correlator, event).await {
            Outcome::Written => {}
            Outcome::SpamFiltered => {
                spam_filtered.inc_by(occurrences);
            }
            Outcome::Lost => {
                dropped.inc_by(occurrences);
            }
        }
        // A flush deadline may have moved it past this one already.
        buffer
            .done
            .send_modify(|done| *done = (*done).max(waiting.seq));
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
