//! Owns [`Informer`]: one cache of one kind in one scope, and the dispatch lock that keeps its
//! store and its subscribers' queues consistent with each other.
//!
//! Every mutation (store write + queuing the resulting event to every handler) and every late
//! registration (store replay + joining the subscriber list) happens under one short mutex that
//! never awaits, so a handler registered at any time sees each object exactly once more as
//! `Added` and then every later change, with no gap and no duplicate.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use kube::Resource;
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::InformerError;
use super::driver::{self, Cache, Transform};
use super::event::{Event, EventHandler};
use super::event_span::event_span;
use super::key::ObjectKey;
use super::listener::{HandlerRegistration, Listener, ListenerTask, Notification, RemoveListener};
use super::scope::InformerScope;
use super::source::EventSource;
use super::store::{IndexFn, NAMESPACE_INDEX, Store};

/// client-go raises handler resync periods below one second to one second.
const MIN_RESYNC: Duration = Duration::from_secs(1);

/// Drops `metadata.managedFields`, the informer's default transform: server-side-apply
/// bookkeeping that no controller reads and that is often the largest part of an object.
pub fn drop_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// The shared cache and event source for one kind in one scope; every controller asking the
/// factory for the same kind and scope gets a clone of the same informer (one LIST, one WATCH).
pub struct Informer<K> {
    pub(crate) shared: Arc<Shared<K>>,
}

impl<K> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K> std::fmt::Debug for Informer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("kind", &self.shared.kind)
            .field("scope", &self.shared.scope)
            .field("synced", &self.shared.sync_state.borrow().synced)
            .finish()
    }
}

/// Whether the informer has listed once, and whether its task has ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SyncState {
    pub(crate) synced: bool,
    pub(crate) stopped: bool,
}

pub(crate) struct Shared<K> {
    pub(crate) kind: String,
    pub(crate) scope: InformerScope,
    pub(crate) store: Store<K>,
    dispatch: Mutex<Dispatch<K>>,
    pub(crate) sync_state: watch::Sender<SyncState>,
    setup: Mutex<Setup<K>>,
    started: AtomicBool,
    pub(crate) watch_errors: AtomicU64,
    default_resync: Option<Duration>,
}

struct Setup<K> {
    transform: Transform<K>,
}

struct Dispatch<K> {
    listeners: Vec<Listener<K>>,
    next_id: u64,
    synced: bool,
    stopped: bool,
    runtime: Option<Runtime>,
    /// Handlers registered before start, spawned once a runtime is known.
    pending: Vec<ListenerTask<K>>,
}

#[derive(Clone)]
struct Runtime {
    handle: tokio::runtime::Handle,
    stop: CancellationToken,
}

impl<K: Resource + Send + Sync + 'static> Informer<K> {
    /// Creates an unstarted informer; `kind` and `scope` only label logs and status.
    pub(crate) fn new(
        kind: String,
        scope: InformerScope,
        default_resync: Option<Duration>,
    ) -> Self {
        let (sync_state, _) = watch::channel(SyncState::default());
        Self {
            shared: Arc::new(Shared {
                kind,
                scope,
                store: Store::new(),
                dispatch: Mutex::new(Dispatch {
                    listeners: Vec::new(),
                    next_id: 0,
                    synced: false,
                    stopped: false,
                    runtime: None,
                    pending: Vec::new(),
                }),
                sync_state,
                setup: Mutex::new(Setup {
                    transform: Arc::new(drop_managed_fields::<K>),
                }),
                started: AtomicBool::new(false),
                watch_errors: AtomicU64::new(0),
                default_resync,
            }),
        }
    }

    /// The cache this informer keeps; cheap to clone and safe to read from any task.
    pub fn store(&self) -> Store<K> {
        self.shared.store.clone()
    }

    /// Subscribes a handler with the factory's default resync period. Registering after start
    /// replays the current contents as `Added` first, like client-go's `AddEventHandler`.
    ///
    /// Keep the returned registration (or [`detach`](HandlerRegistration::detach) it): dropping
    /// it unsubscribes, so `let _ = informer.add_handler(..)` subscribes nothing.
    pub fn add_handler(&self, handler: impl EventHandler<K>) -> HandlerRegistration {
        self.register(Box::new(handler), self.shared.default_resync)
    }

    /// Subscribes a handler that additionally receives every cached object as `Updated` with
    /// old == new each `resync` period (zero disables; below one second is raised to one second).
    pub fn add_handler_with_resync(
        &self,
        handler: impl EventHandler<K>,
        resync: Duration,
    ) -> HandlerRegistration {
        self.register(Box::new(handler), Some(resync))
    }

    /// Replaces the transform applied to every object before it is cached (default:
    /// [`drop_managed_fields`]); the replacement does not also drop managedFields unless it calls
    /// that function. Fails once started, so the cache never mixes transformed and raw objects.
    pub fn set_transform(
        &self,
        f: impl Fn(&mut K) + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        let mut setup = self.shared.setup.lock();
        self.ensure_not_started()?;
        setup.transform = Arc::new(f);
        Ok(())
    }

    /// Adds a named index queried with [`Store::by_index`]. Fails once started or if the name is
    /// taken (the `namespace` index exists from the start).
    pub fn add_index(
        &self,
        name: &str,
        f: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        let _setup = self.shared.setup.lock();
        self.ensure_not_started()?;
        if name == NAMESPACE_INDEX || self.shared.store.has_indexer(name) {
            return Err(InformerError::IndexExists {
                informer: self.shared.describe(),
                index: name.to_string(),
            });
        }
        let f: IndexFn<K> = Arc::new(f);
        self.shared.store.add_indexer(name, f);
        Ok(())
    }

    /// True once the first complete list is in the store (client-go's `HasSynced`); handlers may
    /// still be catching up, see [`HandlerRegistration::has_synced`].
    pub fn has_synced(&self) -> bool {
        self.shared.sync_state.borrow().synced
    }

    /// Waits until the first complete list is in the store. Returns false if the informer
    /// stopped (shutdown) before it ever synced, so callers do not wait forever.
    pub async fn wait_for_sync(&self) -> bool {
        let mut rx = self.shared.sync_state.subscribe();
        match rx.wait_for(|s| s.synced || s.stopped).await {
            Ok(state) => state.synced,
            Err(_) => false,
        }
    }

    /// Number of watch or list failures so far; a climbing count with `synced == false` is what
    /// /readyz reports.
    pub fn watch_errors(&self) -> u64 {
        self.shared.watch_errors.load(Ordering::Relaxed)
    }

    fn ensure_not_started(&self) -> Result<(), InformerError> {
        if self.shared.started.load(Ordering::Acquire) {
            return Err(InformerError::AlreadyStarted {
                informer: self.shared.describe(),
            });
        }
        Ok(())
    }

    fn register(
        &self,
        handler: Box<dyn EventHandler<K>>,
        resync: Option<Duration>,
    ) -> HandlerRegistration {
        let resync = resync.filter(|p| !p.is_zero()).map(|p| p.max(MIN_RESYNC));
        let (tx, rx) = mpsc::unbounded_channel();
        let removed = CancellationToken::new();
        let (synced, synced_rx) = watch::channel(false);

        let mut d = self.shared.dispatch.lock();
        let id = d.next_id;
        d.next_id += 1;
        let listener = Listener { id, tx };
        if d.synced {
            for obj in self.shared.store.list() {
                let event = Event::Added(obj);
                let span = event_span(&self.shared.kind, EventSource::Replay, &event);
                listener.send(Notification::Event(event, span, EventSource::Replay));
            }
            listener.send(Notification::InitialListDelivered);
        }
        if !d.stopped {
            d.listeners.push(listener);
        }
        let task = ListenerTask {
            id,
            rx,
            handler,
            removed: removed.clone(),
            synced,
            resync,
        };
        match d.runtime.clone() {
            Some(rt) => spawn_listener(&self.shared, &rt, task),
            None => d.pending.push(task),
        }
        drop(d);

        let informer: Weak<dyn RemoveListener> =
            Arc::downgrade(&self.shared) as Weak<dyn RemoveListener>;
        HandlerRegistration {
            id,
            synced: synced_rx,
            removed,
            informer,
            detached: false,
        }
    }

    /// Starts the informer on `stream` (a kube-runtime watcher, or a synthetic one in tests);
    /// fails if already started or when called outside a Tokio runtime.
    pub(crate) fn start_with_stream<S>(
        &self,
        stream: S,
        shutdown: &CancellationToken,
    ) -> Result<(), InformerError>
    where
        S: futures::Stream<
                Item = Result<kube_runtime::watcher::Event<K>, kube_runtime::watcher::Error>,
            > + Send
            + 'static,
    {
        let handle =
            tokio::runtime::Handle::try_current().map_err(|_| InformerError::NoRuntime {
                informer: self.shared.describe(),
            })?;
        let transform = {
            let setup = self.shared.setup.lock();
            if self.shared.started.swap(true, Ordering::AcqRel) {
                return Err(InformerError::AlreadyStarted {
                    informer: self.shared.describe(),
                });
            }
            Arc::clone(&setup.transform)
        };
        let rt = Runtime {
            handle,
            stop: shutdown.child_token(),
        };
        {
            let mut d = self.shared.dispatch.lock();
            d.runtime = Some(rt.clone());
            for task in std::mem::take(&mut d.pending) {
                spawn_listener(&self.shared, &rt, task);
            }
        }
        tracing::debug!(informer = %self.shared.describe(), "starting informer");
        rt.handle.spawn(driver::drive(
            Arc::clone(&self.shared),
            stream,
            transform,
            rt.stop.clone(),
        ));
        Ok(())
    }

    /// Whether [`SharedInformerFactory::start`](super::SharedInformerFactory::start) has started
    /// it; an informer requested after `start` needs another `start`.
    pub fn is_started(&self) -> bool {
        self.shared.started.load(Ordering::Acquire)
    }
}

fn spawn_listener<K: Resource + Send + Sync + 'static>(
    shared: &Arc<Shared<K>>,
    rt: &Runtime,
    task: ListenerTask<K>,
) {
    if let Some(period) = task.resync {
        rt.handle.spawn(driver::resync_loop(
            Arc::downgrade(shared),
            task.id,
            period,
            task.removed.clone(),
            rt.stop.clone(),
        ));
    }
    rt.handle.spawn(task.run());
}

impl<K: Resource + Send + Sync + 'static> Shared<K> {
    /// `kind` plus scope, for log lines and error messages.
    pub(crate) fn describe(&self) -> String {
        if self.scope.is_everything() {
            self.kind.clone()
        } else {
            format!("{} ({})", self.kind, self.scope)
        }
    }
}

impl<K: Resource + Send + Sync + 'static> Cache<K> for Shared<K> {
    fn describe(&self) -> String {
        Shared::describe(self)
    }

    fn watch_failed(&self) -> u64 {
        self.watch_errors.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Caches one added or modified object and queues the event to every handler.
    fn upsert(&self, key: ObjectKey, obj: Arc<K>) {
        let mut d = self.dispatch.lock();
        let event = self.store.upsert(key, obj);
        let span = event_span(&self.kind, EventSource::Watch, &event);
        broadcast(&mut d, &event, &span, EventSource::Watch);
    }

    /// Forgets one deleted object and queues `Deleted` with the final state the watch reported.
    /// A delete for an object never cached (nothing a handler saw) is dropped.
    fn delete(&self, key: &ObjectKey, last: Arc<K>) {
        let mut d = self.dispatch.lock();
        if self.store.remove(key).is_none() {
            tracing::debug!(informer = %self.describe(), %key, "delete of an object not in the cache ignored");
            return;
        }
        let event = Event::Deleted(last);
        let span = event_span(&self.kind, EventSource::Watch, &event);
        broadcast(&mut d, &event, &span, EventSource::Watch);
    }

    /// Swaps in a complete list and queues the difference; the first one marks the informer,
    /// and every handler registered so far, as synced.
    fn replace(&self, listed: Vec<(ObjectKey, Arc<K>)>) {
        let mut d = self.dispatch.lock();
        let events = self.store.replace(listed);
        let source = if d.synced {
            EventSource::Relist
        } else {
            EventSource::List
        };
        for event in &events {
            let span = event_span(&self.kind, source, event);
            broadcast(&mut d, event, &span, source);
        }
        if !d.synced {
            d.synced = true;
            d.listeners
                .retain(|l| l.send(Notification::InitialListDelivered));
            self.sync_state.send_modify(|s| s.synced = true);
            tracing::info!(informer = %self.describe(), objects = self.store.len(), "informer synced");
        } else {
            tracing::debug!(informer = %self.describe(), changes = events.len(), "informer relisted");
        }
    }

    /// Queues every cached object as `Updated { old == new }` to one handler.
    fn resync(&self, id: u64) {
        let d = self.dispatch.lock();
        if !d.synced {
            return;
        }
        let Some(listener) = d.listeners.iter().find(|l| l.id == id) else {
            return;
        };
        for obj in self.store.list() {
            let event = Event::Updated {
                old: Arc::clone(&obj),
                new: obj,
            };
            let span = event_span(&self.kind, EventSource::Resync, &event);
            listener.send(Notification::Event(event, span, EventSource::Resync));
        }
    }

    /// Called when the informer's task ends: handlers drain what is queued and then stop.
    fn shut_down(&self) {
        let mut d = self.dispatch.lock();
        d.stopped = true;
        d.listeners.clear();
        if let Some(rt) = &d.runtime {
            rt.stop.cancel();
        }
        drop(d);
        self.sync_state.send_modify(|s| s.stopped = true);
        tracing::debug!(informer = %self.describe(), "informer stopped");
    }
}

fn broadcast<K>(d: &mut Dispatch<K>, event: &Event<K>, span: &tracing::Span, source: EventSource) {
    d.listeners
        .retain(|l| l.send(Notification::Event(event.clone(), span.clone(), source)));
}

impl<K: Send + Sync> RemoveListener for Shared<K> {
    fn remove_listener(&self, id: u64) {
        let mut d = self.dispatch.lock();
        d.listeners.retain(|l| l.id != id);
        d.pending.retain(|t| t.id != id);
    }
}
