//! The object store: every object of every type as JSON, one global resourceVersion counter, the
//! bounded event history that watches resume from, and the fan-out of new events to open
//! watches. All writes happen under one lock so resourceVersions, history and fan-out agree.
//!
//! The history is bounded twice: by events (`window`) and by bytes (`history_bytes`, the JSON
//! size of each event's object and previous object), dropping the oldest first, so a watch from
//! before them gets 410 Gone as after a real server's compaction. Without the byte bound, 10,000
//! events of 1.5 MiB objects would hold 15 GiB.
//!
//! Fan-out never blocks a writer: each watch has a bounded channel, and a watch whose channel is
//! full is closed (like kube-apiserver's cacher closing an unresponsive watcher); its client
//! re-watches from the last resourceVersion it saw.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::Value;

use crate::api::json_depth;
use crate::api::kinds::{ResId, TABLE, lookup};
use crate::api::types::{Registry, Served};
use crate::storage::allocations::Allocations;
use crate::storage::backlog::{self, Limits};
use crate::storage::selectors::Filter;

/// Store key of one object: (namespace, name); namespace is empty for cluster-scoped types.
pub type ObjKey = (String, String);

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created (or, for a selector-filtered watch, started matching).
    Added,
    /// Changed.
    Modified,
    /// Deleted (or stopped matching).
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// The default byte bound of the event history: 64 MiB of JSON.
pub const DEFAULT_HISTORY_BYTES: usize = 64 << 20;

/// The default byte bound of one watcher's backlog: 16 MiB of watch frames.
pub const DEFAULT_WATCH_BUFFER_BYTES: usize = 16 << 20;

/// One change, kept in history and sent to watches.
#[derive(Debug)]
pub struct Event {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Type of the object.
    pub res: ResId,
    /// What happened.
    pub ty: EventType,
    /// The object after the change (for deletes: the last state, with the delete's rv).
    pub object: Arc<Value>,
    /// The object before the change, used to turn selector transitions into ADDED/DELETED.
    pub prev: Option<Arc<Value>>,
    line: OnceLock<Bytes>,
    /// What it costs the history ([`history_cost`]); 0 for events never kept there.
    cost: usize,
}

impl Event {
    fn new(
        rv: u64,
        res: ResId,
        ty: EventType,
        object: Arc<Value>,
        prev: Option<Arc<Value>>,
    ) -> Event {
        Event {
            rv,
            res,
            ty,
            object,
            prev,
            line: OnceLock::new(),
            cost: 0,
        }
    }

    /// The newline-terminated watch frame, serialized once and shared by every watch.
    pub fn line(&self) -> Bytes {
        self.line
            .get_or_init(|| watch_line(self.ty.as_str(), &self.object))
            .clone()
    }
}

/// What an event costs the history: the JSON size of its object and of the object before it (which
/// the history keeps alive), counted without building the JSON.
fn history_cost(event: &Event) -> usize {
    json_len(&event.object) + event.prev.as_deref().map_or(0, json_len)
}

fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail; a Value always serializes.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// `{"type":TYPE,"object":OBJ}\n`.
pub fn watch_line(ty: &str, object: &Value) -> Bytes {
    let mut buf = Vec::with_capacity(512);
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(ty.as_bytes());
    buf.extend_from_slice(b"\",\"object\":");
    if serde_json::to_writer(&mut buf, object).is_err() {
        buf.extend_from_slice(b"null");
    }
    buf.extend_from_slice(b"}\n");
    Bytes::from(buf)
}

struct Subscriber {
    id: u64,
    res: ResId,
    filter: Filter,
    trivial: bool,
    /// For a custom resource: the watched version's apiVersion, which objects stored at another
    /// version are sent with (conversion `None` changes nothing else).
    api_version: Option<String>,
    tx: backlog::Sender<Arc<Event>>,
}

static EMPTY: BTreeMap<ObjKey, Arc<Value>> = BTreeMap::new();

/// The mutable state behind the store lock; handlers run their whole read-modify-write on it.
pub struct State {
    rv: u64,
    objects: Vec<BTreeMap<ObjKey, Arc<Value>>>,
    history: VecDeque<Arc<Event>>,
    window: usize,
    /// JSON bytes of the events in `history` (see [`history_cost`]), at most `history_cap`
    /// unless the newest event alone is larger.
    history_bytes: usize,
    history_cap: usize,
    floor: u64,
    subscribers: Vec<Subscriber>,
    next_sub: u64,
    watch_buffer: Limits,
    services: Option<ResId>,
    allocations: Allocations,
    types: Registry,
}

/// The store: a lock around [`State`].
pub struct Store {
    state: Mutex<State>,
}

impl Store {
    /// An empty store keeping `window` events of history, at most
    /// [`DEFAULT_HISTORY_BYTES`] of them (see [`Store::history_bytes`]).
    pub fn new(window: usize, watch_buffer: usize) -> Store {
        Store {
            state: Mutex::new(State {
                rv: 0,
                objects: TABLE.iter().map(|_| BTreeMap::new()).collect(),
                history: VecDeque::with_capacity(window.min(1 << 16)),
                window: window.max(1),
                history_bytes: 0,
                history_cap: DEFAULT_HISTORY_BYTES,
                floor: 0,
                subscribers: Vec::new(),
                next_sub: 0,
                watch_buffer: Limits {
                    events: watch_buffer.max(1),
                    bytes: DEFAULT_WATCH_BUFFER_BYTES,
                },
                services: lookup("", "v1", "services"),
                allocations: Allocations::default(),
                types: Registry::default(),
            }),
        }
    }

    /// Keeps at most `bytes` of event history (JSON of each event's object and previous object);
    /// the newest event is kept even when it alone is larger.
    pub fn history_bytes(self, bytes: usize) -> Store {
        self.state.lock().history_cap = bytes;
        self
    }

    /// Closes a watch whose unsent events would pass `bytes` of watch frames (default
    /// [`DEFAULT_WATCH_BUFFER_BYTES`]), besides its `watch_buffer` events.
    pub fn watch_buffer_bytes(self, bytes: usize) -> Store {
        self.state.lock().watch_buffer.bytes = bytes;
        self
    }

    /// Runs `f` under the store lock.
    pub fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock())
    }
}

/// Where a new watch starts.
pub enum WatchStart {
    /// Replay history after this resourceVersion.
    From(u64),
    /// Send the current objects as ADDED first (rv unset / "0" / sendInitialEvents).
    Snapshot,
}

/// The opening of a watch: what to send before live events, and the live channel.
pub struct Subscription {
    /// Events to send first, in order.
    pub initial: Vec<Arc<Event>>,
    /// resourceVersion the initial part brings the client up to.
    pub rv: u64,
    /// Live events.
    pub rx: backlog::Receiver<Arc<Event>>,
}

/// Objects may nest [`json_depth::MAX_DEPTH`] deep, and dropping a `Value` recurses: the store's
/// objects and events go on a thread with a stack for that, not on the async worker that drops
/// the last handle.
impl Drop for Store {
    fn drop(&mut self) {
        let s = self.state.get_mut();
        let held = (
            std::mem::take(&mut s.objects),
            std::mem::take(&mut s.history),
            std::mem::take(&mut s.subscribers),
        );
        let dropper = std::thread::Builder::new()
            .name("kube-testenv-drop".into())
            .stack_size(json_depth::STACK_BYTES)
            .spawn(move || drop(held));
        if let Ok(handle) = dropper {
            let _ = handle.join();
        }
    }
}

impl State {
    /// The latest resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// The oldest resourceVersion a watch can still resume from.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// The served types (built-in and CRD-defined).
    pub fn types(&self) -> &Registry {
        &self.types
    }

    /// The served types, for registering and retiring CRD-defined ones.
    pub fn types_mut(&mut self) -> &mut Registry {
        &mut self.types
    }

    /// The served type with this id, if still served.
    pub fn served(&self, res: ResId) -> Option<Served> {
        self.types.get(res)
    }

    /// The id whose objects `res` addresses: every version of a CRD shares one object map.
    fn map_id(&self, res: ResId) -> ResId {
        match self.types.get(res) {
            Some(Served::Custom(c)) => c.objects,
            _ => res,
        }
    }

    fn map(&self, res: ResId) -> &BTreeMap<ObjKey, Arc<Value>> {
        self.objects.get(self.map_id(res)).unwrap_or(&EMPTY)
    }

    fn map_mut(&mut self, res: ResId) -> &mut BTreeMap<ObjKey, Arc<Value>> {
        let id = self.map_id(res);
        if self.objects.len() <= id {
            self.objects.resize_with(id + 1, BTreeMap::new);
        }
        &mut self.objects[id]
    }

    /// Forgets every object of a retired CRD-defined type without events (its CRD's cleanup
    /// deleted them first) and ends the watches on any of its ids.
    pub fn retire(&mut self, ids: &[ResId], objects: ResId) {
        if let Some(m) = self.objects.get_mut(objects) {
            m.clear();
        }
        self.subscribers
            .retain(|s| !ids.contains(&s.res) && s.res != objects);
    }

    /// One object.
    pub fn get(&self, res: ResId, ns: &str, name: &str) -> Option<&Arc<Value>> {
        self.map(res).get(&(ns.to_string(), name.to_string()))
    }

    /// The cluster IPs and node ports stored Services hold, for constant-time allocation.
    pub fn allocations(&self) -> &Allocations {
        &self.allocations
    }

    /// Objects of a type in key order, optionally limited to a namespace, starting after `after`.
    pub fn iter<'a>(
        &'a self,
        res: ResId,
        ns: Option<&'a str>,
        after: Option<ObjKey>,
    ) -> Box<dyn Iterator<Item = (&'a ObjKey, &'a Arc<Value>)> + 'a> {
        use std::ops::Bound;
        let map = self.map(res);
        let lower = match (&after, ns) {
            (Some(k), _) => Bound::Excluded(k.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let it = map.range((lower, Bound::Unbounded));
        match ns {
            Some(ns) => Box::new(it.take_while(move |((n, _), _)| n == ns)),
            None => Box::new(it),
        }
    }

    /// Stores a new or changed object under a fresh resourceVersion and notifies watches.
    pub fn put(&mut self, res: ResId, mut obj: Value, ty: EventType) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let key = key_of(&obj);
        let obj = Arc::new(obj);
        let res = self.map_id(res);
        let prev = self.map_mut(res).insert(key, obj.clone());
        if Some(res) == self.services {
            if let Some(prev) = &prev {
                self.allocations.release(prev);
            }
            self.allocations.add(&obj);
        }
        self.record(Event::new(rv, res, ty, obj.clone(), prev));
        obj
    }

    /// Removes an object under a fresh resourceVersion and notifies watches.
    pub fn remove(&mut self, res: ResId, ns: &str, name: &str) -> Option<Arc<Value>> {
        let res = self.map_id(res);
        let prev = self
            .map_mut(res)
            .remove(&(ns.to_string(), name.to_string()))?;
        if Some(res) == self.services {
            self.allocations.release(&prev);
        }
        self.rv += 1;
        let rv = self.rv;
        let mut last = (*prev).clone();
        if let Some(meta) = last.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let last = Arc::new(last);
        self.record(Event::new(
            rv,
            res,
            EventType::Deleted,
            last.clone(),
            Some(prev),
        ));
        Some(last)
    }

    fn record(&mut self, mut event: Event) {
        event.cost = history_cost(&event);
        self.history_bytes += event.cost;
        let event = Arc::new(event);
        self.history.push_back(event.clone());
        while self.history.len() > 1
            && (self.history.len() > self.window || self.history_bytes > self.history_cap)
            && let Some(old) = self.history.pop_front()
        {
            self.history_bytes -= old.cost;
            self.floor = old.rv;
        }
        self.subscribers.retain(|sub| {
            if sub.res != event.res {
                return !sub.tx.is_closed();
            }
            let out = if sub.trivial {
                Some(event.clone())
            } else {
                filtered(&event, &sub.filter)
            };
            let out = out.map(|e| as_version(e, sub.api_version.as_deref()));
            match out {
                None => true,
                Some(ev) => {
                    let size = ev.line().len();
                    sub.tx.offer(sub.id, ev, size)
                }
            }
        });
    }

    /// Opens a watch. Returns `Err(floor)` when `start` is older than the retained history.
    pub fn subscribe(
        &mut self,
        res: ResId,
        filter: Filter,
        start: WatchStart,
    ) -> Result<Subscription, u64> {
        let api_version = match self.types.get(res) {
            Some(Served::Custom(c)) => Some(format!("{}/{}", c.group, c.version)),
            _ => None,
        };
        let res = self.map_id(res);
        let initial: Vec<Arc<Event>> = match start {
            WatchStart::From(from) => {
                if from < self.floor {
                    return Err(self.floor);
                }
                self.history
                    .iter()
                    .filter(|e| e.rv > from && e.res == res)
                    .filter_map(|e| filtered(e, &filter))
                    .collect()
            }
            WatchStart::Snapshot => self
                .iter(res, filter.namespace.as_deref(), None)
                .filter(|(_, o)| filter.matches(o))
                .map(|(_, o)| {
                    Arc::new(Event::new(rv_of(o), res, EventType::Added, o.clone(), None))
                })
                .collect(),
        };
        let initial = initial
            .into_iter()
            .map(|e| as_version(e, api_version.as_deref()))
            .collect();
        let (tx, rx) = backlog::channel(self.watch_buffer);
        self.next_sub += 1;
        let trivial = filter.namespace.is_none()
            && filter.labels == Default::default()
            && filter.fields.is_empty();
        self.subscribers.push(Subscriber {
            id: self.next_sub,
            res,
            filter,
            trivial,
            api_version,
            tx,
        });
        Ok(Subscription {
            initial,
            rv: self.rv,
            rx,
        })
    }

    /// The objects of a type as they were at `rv` (>= floor), rebuilt by undoing newer history.
    pub fn snapshot_at(&self, res: ResId, rv: u64) -> BTreeMap<ObjKey, Arc<Value>> {
        let res = self.map_id(res);
        let mut snap = self.map(res).clone();
        for e in self
            .history
            .iter()
            .rev()
            .filter(|e| e.rv > rv && e.res == res)
        {
            let key = key_of(&e.object);
            match &e.prev {
                Some(prev) => {
                    snap.insert(key, prev.clone());
                }
                None => {
                    snap.remove(&key);
                }
            }
        }
        snap
    }

    /// Closes every open watch (their streams end cleanly).
    pub fn close_watches(&mut self) {
        self.subscribers.clear();
    }

    /// Forgets all history so a watch from any older resourceVersion gets 410 Gone.
    pub fn expire_history(&mut self) {
        self.history.clear();
        self.history_bytes = 0;
        self.floor = self.rv;
    }

    /// Number of open watches (for tests of watch cleanup).
    pub fn watch_count(&self) -> usize {
        self.subscribers
            .iter()
            .filter(|s| !s.tx.is_closed())
            .count()
    }
}

/// The event with its object at `api_version` (a custom resource read through another version).
fn as_version(event: Arc<Event>, api_version: Option<&str>) -> Arc<Event> {
    match api_version {
        Some(av) if event.object.get("apiVersion").and_then(Value::as_str) != Some(av) => {
            let mut obj = (*event.object).clone();
            obj["apiVersion"] = av.into();
            Arc::new(Event::new(
                event.rv,
                event.res,
                event.ty,
                Arc::new(obj),
                event.prev.clone(),
            ))
        }
        _ => event,
    }
}

/// The event one filtered watch sees: selector transitions become ADDED / DELETED, as upstream.
fn filtered(event: &Arc<Event>, filter: &Filter) -> Option<Arc<Event>> {
    let now = filter.matches(&event.object);
    let before = event.prev.as_ref().is_some_and(|p| filter.matches(p));
    let ty = match event.ty {
        EventType::Added => now.then_some(EventType::Added),
        EventType::Deleted => (before || now).then_some(EventType::Deleted),
        EventType::Modified => match (before, now) {
            (true, true) => Some(EventType::Modified),
            (false, true) => Some(EventType::Added),
            (true, false) => Some(EventType::Deleted),
            (false, false) => None,
        },
    }?;
    if ty == event.ty {
        Some(event.clone())
    } else {
        Some(Arc::new(Event::new(
            event.rv,
            event.res,
            ty,
            event.object.clone(),
            None,
        )))
    }
}

/// (namespace, name) of a stored object.
pub fn key_of(obj: &Value) -> ObjKey {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (s("/metadata/namespace"), s("/metadata/name"))
}

/// metadata.resourceVersion as a number.
pub fn rv_of(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
