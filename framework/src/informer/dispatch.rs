//! Owns `Shared`: one cache of one kind in one scope, whatever views use it, and the dispatch
//! lock that keeps its store and its subscribers' queues consistent with each other.
//!
//! Every mutation (store write + queuing the resulting event to every handler) and every late
//! registration (store replay + joining the subscriber list) happens under one short mutex that
//! never awaits, so a handler registered at any time sees each object exactly once more as
//! `Added` and then every later change, with no gap and no duplicate.
//!
//! An informer watches through one or more *parts*: one watch for the whole scope, or one per
//! namespace when the process caches a kind in a set of namespaces. Each part relists only its
//! own namespace; the informer is synced once every part has listed.

use std::any::{Any, TypeId};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::InformerError;
use super::driver::{self, Cache, Transform};
use super::event::{Event, EventHandler};
use super::event_span::event_span;
use super::key::ObjectKey;
use super::listener::{HandlerRegistration, Listener, ListenerTask, Notification, RemoveListener};
use super::object::{Obj, Object};
use super::resource::CacheResource;
use super::scope::InformerScope;
use super::source::EventSource;
use super::store::{IndexFn, NAMESPACE_INDEX, Objects};
use super::view::Projection;

/// client-go raises handler resync periods below one second to one second.
const MIN_RESYNC: Duration = Duration::from_secs(1);

/// Drops `metadata.managedFields`, the informer's default transform: server-side-apply
/// bookkeeping that no controller reads and that is often the largest part of an object.
pub fn drop_managed_fields<K: kube::Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// Whether the informer has listed once, and whether its task has ended; why it cannot start,
/// or what it waits for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SyncState {
    pub(crate) synced: bool,
    pub(crate) stopped: bool,
    /// The kind is not served yet (its CRD is not Established): what the informer waits for.
    pub(crate) waiting: Option<String>,
    /// It will never list: the kind is unknown or not listable, a selector was refused, ...
    pub(crate) failed: Option<String>,
}

impl SyncState {
    /// Whether there is nothing more to wait for at start-up.
    pub(crate) fn settled(&self) -> bool {
        self.synced || self.stopped || self.waiting.is_some() || self.failed.is_some()
    }
}

/// A transform of a stored object of a type known where it was made.
type AnyTransform = Arc<dyn Fn(&mut dyn Any) + Send + Sync>;

/// A transform before storing, as a view or the kind's options asked for it.
#[derive(Clone)]
pub(crate) enum ViewTransform {
    /// Applies to the metadata of any stored type.
    Meta(Arc<dyn Fn(&mut ObjectMeta) + Send + Sync>),
    /// Applies only when the informer stores objects of this type.
    Typed {
        type_id: TypeId,
        type_name: &'static str,
        apply: AnyTransform,
    },
}

impl ViewTransform {
    /// A transform of `V`: of the metadata for a metadata view (so it applies to whatever the
    /// informer stores), else of the full objects of type `V`.
    pub(crate) fn of<V: CacheResource>(f: impl Fn(&mut V) + Send + Sync + 'static) -> Self {
        if V::metadata_api() {
            return ViewTransform::Meta(Arc::new(move |meta| Projection::<V>::edit_meta(meta, &f)));
        }
        ViewTransform::Typed {
            type_id: TypeId::of::<V>(),
            type_name: std::any::type_name::<V>(),
            apply: Arc::new(move |obj: &mut dyn Any| {
                if let Some(obj) = obj.downcast_mut::<V>() {
                    f(obj)
                }
            }),
        }
    }
}

pub(crate) struct Shared {
    pub(crate) kind: String,
    pub(crate) scope: InformerScope,
    pub(crate) store: Objects,
    dispatch: Mutex<Dispatch>,
    pub(crate) sync_state: watch::Sender<SyncState>,
    setup: Mutex<Vec<ViewTransform>>,
    started: AtomicBool,
    watch_errors: AtomicU64,
    pub(crate) default_resync: Option<Duration>,
    /// Whether the kind is namespaced, once known (at once for compile-time kinds).
    namespaced: OnceLock<bool>,
}

struct Part {
    /// The namespace this part watches; `None`: the whole scope.
    namespace: Option<String>,
    listed: bool,
}

struct Dispatch {
    listeners: Vec<Listener>,
    next_id: u64,
    parts: Vec<Part>,
    synced: bool,
    stopped: bool,
    runtime: Option<Runtime>,
    /// Handlers registered before start, spawned once a runtime is known.
    pending: Vec<ListenerTask>,
}

#[derive(Clone)]
pub(crate) struct Runtime {
    handle: tokio::runtime::Handle,
    pub(crate) stop: CancellationToken,
}

impl Shared {
    /// An unstarted cache; `kind` and `scope` only label logs and status.
    pub(crate) fn new(
        kind: String,
        scope: InformerScope,
        default_resync: Option<Duration>,
        namespaced: Option<bool>,
    ) -> Arc<Self> {
        let (sync_state, _) = watch::channel(SyncState::default());
        let known = OnceLock::new();
        if let Some(namespaced) = namespaced {
            let _ = known.set(namespaced);
        }
        Arc::new(Shared {
            kind,
            scope,
            store: Objects::new(),
            dispatch: Mutex::new(Dispatch {
                listeners: Vec::new(),
                next_id: 0,
                parts: Vec::new(),
                synced: false,
                stopped: false,
                runtime: None,
                pending: Vec::new(),
            }),
            sync_state,
            setup: Mutex::new(Vec::new()),
            started: AtomicBool::new(false),
            watch_errors: AtomicU64::new(0),
            default_resync,
            namespaced: known,
        })
    }

    /// `kind` plus scope, for log lines and error messages.
    pub(crate) fn describe(&self) -> String {
        if self.scope.is_everything() {
            self.kind.clone()
        } else {
            format!("{} ({})", self.kind, self.scope)
        }
    }

    pub(crate) fn is_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    pub(crate) fn has_synced(&self) -> bool {
        self.sync_state.borrow().synced
    }

    pub(crate) fn watch_errors(&self) -> u64 {
        self.watch_errors.load(Ordering::Relaxed)
    }

    /// Whether the kind is namespaced; `None` until discovery has resolved a run-time kind.
    pub(crate) fn namespaced(&self) -> Option<bool> {
        self.namespaced.get().copied()
    }

    pub(crate) fn set_namespaced(&self, namespaced: bool) {
        let _ = self.namespaced.set(namespaced);
    }

    fn already_started(&self) -> InformerError {
        InformerError::AlreadyStarted {
            informer: self.describe(),
        }
    }

    /// Marks the informer started: transforms and indexes are fixed from now on.
    pub(crate) fn mark_started(&self) -> Result<(), InformerError> {
        let _setup = self.setup.lock();
        if self.started.swap(true, Ordering::AcqRel) {
            return Err(self.already_started());
        }
        Ok(())
    }

    pub(crate) fn add_transform(&self, transform: ViewTransform) -> Result<(), InformerError> {
        let mut setup = self.setup.lock();
        if self.is_started() {
            return Err(self.already_started());
        }
        setup.push(transform);
        Ok(())
    }

    pub(crate) fn add_index(&self, name: &str, f: IndexFn) -> Result<(), InformerError> {
        let _setup = self.setup.lock();
        if self.is_started() {
            return Err(self.already_started());
        }
        if name == NAMESPACE_INDEX || self.store.has_indexer(name) {
            return Err(InformerError::IndexExists {
                informer: self.describe(),
                index: name.to_string(),
            });
        }
        self.store.add_indexer(name, f);
        Ok(())
    }

    /// The types whose full-object transforms are set.
    pub(crate) fn typed_transforms(&self) -> Vec<TypeId> {
        self.setup
            .lock()
            .iter()
            .filter_map(|t| match t {
                ViewTransform::Typed { type_id, .. } => Some(*type_id),
                ViewTransform::Meta(_) => None,
            })
            .collect()
    }

    /// Stops the informer (shutdown came before it could open its watches).
    pub(crate) fn stop(&self) {
        Cache::shut_down(self);
    }

    /// The transform for objects stored as `S`: every transform set, in order; a full-object
    /// transform of another type is skipped when `S` is metadata (there is nothing of it to
    /// strip) and refused otherwise. Without any that applies: [`drop_managed_fields`].
    pub(crate) fn transform_for<S: CacheResource>(&self) -> Result<Transform<S>, String> {
        let mut steps = Vec::new();
        for transform in self.setup.lock().iter() {
            match transform {
                ViewTransform::Typed {
                    type_id, type_name, ..
                } if *type_id != TypeId::of::<S>() => {
                    if !S::metadata_api() {
                        return Err(format!(
                            "a transform is set for {type_name}, but {} objects are stored as {}: set it for that type, or as a metadata transform",
                            self.kind,
                            std::any::type_name::<S>()
                        ));
                    }
                    tracing::debug!(informer = %self.describe(), transform = type_name, "full-object transform skipped: the informer caches metadata only");
                }
                other => steps.push(other.clone()),
            }
        }
        if steps.is_empty() {
            return Ok(Arc::new(drop_managed_fields::<S>));
        }
        Ok(Arc::new(move |obj: &mut S| {
            for step in &steps {
                match step {
                    ViewTransform::Meta(f) => f(obj.meta_mut()),
                    ViewTransform::Typed { apply, .. } => apply(obj as &mut dyn Any),
                }
            }
        }))
    }

    /// Subscribes a handler; registering after start replays the current contents as `Added`.
    pub(crate) fn register(
        self: &Arc<Self>,
        handler: Box<dyn EventHandler<dyn Object>>,
        resync: Option<Duration>,
    ) -> HandlerRegistration {
        let resync = resync.filter(|p| !p.is_zero()).map(|p| p.max(MIN_RESYNC));
        let (tx, rx) = mpsc::unbounded_channel();
        let removed = CancellationToken::new();
        let (synced, synced_rx) = watch::channel(false);

        let mut d = self.dispatch.lock();
        let id = d.next_id;
        d.next_id += 1;
        let listener = Listener { id, tx };
        // Before the first list of every part the store holds only what the parts that have
        // listed put there: those objects are replayed now, the rest arrive as `List` events.
        for obj in self.store.list() {
            let event = Event::Added(obj);
            let span = event_span(&self.kind, EventSource::Replay, &event);
            listener.send(Notification::Event(event, span, EventSource::Replay));
        }
        if d.synced {
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
            Some(rt) => spawn_listener(self, &rt, task),
            None => d.pending.push(task),
        }
        drop(d);

        let informer: Weak<dyn RemoveListener> = Arc::downgrade(self) as Weak<dyn RemoveListener>;
        HandlerRegistration {
            id,
            synced: synced_rx,
            removed,
            informer,
            detached: false,
        }
    }

    /// Takes the runtime the informer's tasks run on and the namespaces of its parts, and
    /// spawns the handlers registered so far; fails outside a Tokio runtime.
    pub(crate) fn run(
        self: &Arc<Self>,
        parts: &[Option<String>],
        shutdown: &CancellationToken,
    ) -> Result<Runtime, InformerError> {
        let handle =
            tokio::runtime::Handle::try_current().map_err(|_| InformerError::NoRuntime {
                informer: self.describe(),
            })?;
        let rt = Runtime {
            handle,
            stop: shutdown.child_token(),
        };
        let mut d = self.dispatch.lock();
        d.runtime = Some(rt.clone());
        d.parts = parts
            .iter()
            .map(|namespace| Part {
                namespace: namespace.clone(),
                listed: false,
            })
            .collect();
        for task in std::mem::take(&mut d.pending) {
            spawn_listener(self, &rt, task);
        }
        drop(d);
        self.sync_state.send_modify(|s| s.waiting = None);
        tracing::debug!(informer = %self.describe(), parts = parts.len(), "starting informer");
        Ok(rt)
    }

    /// Starts the task of part `part` on `stream`.
    pub(crate) fn drive<S, St>(
        self: &Arc<Self>,
        rt: &Runtime,
        part: usize,
        stream: St,
        transform: Transform<S>,
    ) where
        S: CacheResource,
        St: futures::Stream<
                Item = Result<kube_runtime::watcher::Event<S>, kube_runtime::watcher::Error>,
            > + Send
            + 'static,
    {
        rt.handle.spawn(driver::drive(
            Arc::clone(self),
            part,
            stream,
            transform,
            rt.stop.clone(),
        ));
    }

    /// The kind is not served yet: say what the informer waits for (readiness, status).
    pub(crate) fn set_waiting(&self, why: String) {
        self.sync_state.send_if_modified(|s| {
            let changed = s.waiting.as_deref() != Some(why.as_str());
            s.waiting = Some(why);
            changed
        });
    }

    /// The informer can never list: record why and stop it.
    pub(crate) fn fail(&self, why: String) {
        tracing::error!(informer = %self.describe(), reason = %why, "informer cannot start");
        self.sync_state.send_modify(|s| {
            s.waiting = None;
            s.failed = Some(why);
        });
        self.shut_down();
    }
}

fn spawn_listener(shared: &Arc<Shared>, rt: &Runtime, task: ListenerTask) {
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

impl Cache for Shared {
    fn describe(&self) -> String {
        Shared::describe(self)
    }

    fn watch_failed(&self) -> u64 {
        self.watch_errors.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Caches one added or modified object and queues the event to every handler.
    fn upsert(&self, key: ObjectKey, obj: Obj) {
        let mut d = self.dispatch.lock();
        let event = self.store.upsert(key, obj);
        let span = event_span(&self.kind, EventSource::Watch, &event);
        broadcast(&mut d, &event, &span, EventSource::Watch);
    }

    /// Forgets one deleted object and queues `Deleted` with the final state the watch reported.
    /// A delete for an object never cached (nothing a handler saw) is dropped.
    fn delete(&self, key: &ObjectKey, last: Obj) {
        let mut d = self.dispatch.lock();
        if self.store.remove(key).is_none() {
            tracing::debug!(informer = %self.describe(), %key, "delete of an object not in the cache ignored");
            return;
        }
        let event = Event::Deleted(last);
        let span = event_span(&self.kind, EventSource::Watch, &event);
        broadcast(&mut d, &event, &span, EventSource::Watch);
    }

    /// Swaps in a complete list of one part and queues the difference; once every part has
    /// listed, the informer and every handler registered so far count as synced.
    fn replace(&self, part: usize, listed: Vec<(ObjectKey, Obj)>) {
        let mut d = self.dispatch.lock();
        let Some(p) = d.parts.get_mut(part) else {
            return;
        };
        let source = if p.listed {
            EventSource::Relist
        } else {
            EventSource::List
        };
        p.listed = true;
        let events = self.store.replace(p.namespace.clone().as_deref(), listed);
        for event in &events {
            let span = event_span(&self.kind, source, event);
            broadcast(&mut d, event, &span, source);
        }
        if !d.synced && d.parts.iter().all(|p| p.listed) {
            d.synced = true;
            d.listeners
                .retain(|l| l.send(Notification::InitialListDelivered));
            self.sync_state.send_modify(|s| s.synced = true);
            tracing::info!(informer = %self.describe(), objects = self.store.len(), "informer synced");
        } else {
            tracing::debug!(informer = %self.describe(), part, changes = events.len(), "informer listed");
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

    fn fail(&self, why: String) {
        Shared::fail(self, why)
    }

    /// Called when a task of the informer ends: every part stops, handlers drain what is queued
    /// and then stop.
    fn shut_down(&self) {
        let mut d = self.dispatch.lock();
        if d.stopped {
            return;
        }
        d.stopped = true;
        d.listeners.clear();
        // Never spawned (it failed before running): their registrations stop waiting.
        d.pending.clear();
        if let Some(rt) = &d.runtime {
            rt.stop.cancel();
        }
        drop(d);
        self.sync_state.send_modify(|s| s.stopped = true);
        tracing::debug!(informer = %self.describe(), "informer stopped");
    }
}

fn broadcast(
    d: &mut Dispatch,
    event: &Event<dyn Object>,
    span: &tracing::Span,
    source: EventSource,
) {
    d.listeners
        .retain(|l| l.send(Notification::Event(event.clone(), span.clone(), source)));
}

impl RemoveListener for Shared {
    fn remove_listener(&self, id: u64) {
        let mut d = self.dispatch.lock();
        d.listeners.retain(|l| l.id != id);
        d.pending.retain(|t| t.id != id);
    }
}
