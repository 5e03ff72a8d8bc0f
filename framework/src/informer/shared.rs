//! Owns [`Informer`]: one view of a kind's shared cache, as objects of type `V` (the kind's
//! compile-time type, its metadata, or a `DynamicObject`). Every view of one kind and scope is a
//! handle on the same cache (one WATCH, one store); the view only decides the type its handlers,
//! indexes and readers see.

use std::sync::Arc;
use std::time::Duration;

use super::InformerError;
use super::dispatch::{Shared, ViewTransform};
use super::event::{Event, EventHandler};
use super::listener::HandlerRegistration;
use super::object::Object;
use super::resource::CacheResource;
use super::source::EventSource;
use super::store::Store;
use super::view::Projection;

/// The shared cache and event source for one kind in one scope, seen as objects of type `V`;
/// every controller asking the factory for the same kind and scope gets a handle on the same
/// informer (one LIST, one WATCH), whichever view it asks for.
pub struct Informer<V> {
    pub(crate) shared: Arc<Shared>,
    view: Arc<Projection<V>>,
}

impl<V> Clone for Informer<V> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            view: Arc::clone(&self.view),
        }
    }
}

impl<V> std::fmt::Debug for Informer<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("kind", &self.shared.kind)
            .field("scope", &self.shared.scope)
            .field("view", &std::any::type_name::<V>())
            .field("synced", &self.shared.has_synced())
            .finish()
    }
}

/// Hands a view's handler the events of the shared cache as objects of its type.
struct ViewHandler<V, H> {
    view: Arc<Projection<V>>,
    handler: H,
}

impl<V: Send + Sync + 'static, H: EventHandler<V>> EventHandler<dyn Object> for ViewHandler<V, H> {
    fn on_event(&mut self, event: &Event<dyn Object>) {
        self.on_event_from(event, EventSource::Watch);
    }

    fn on_event_from(&mut self, event: &Event<dyn Object>, source: EventSource) {
        if let Some(event) = self.view.event(event) {
            self.handler.on_event_from(&event, source);
        }
    }
}

impl<V: CacheResource> Informer<V> {
    /// The view `V` of `shared`.
    pub(crate) fn view_of(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            view: Arc::new(Projection::new()),
        }
    }

    /// An unstarted informer of its own; `kind` and `scope` only label logs and status.
    #[cfg(test)]
    pub(crate) fn new(
        kind: String,
        scope: super::InformerScope,
        default_resync: Option<Duration>,
    ) -> Self {
        Self::view_of(Shared::new(
            kind,
            scope,
            default_resync,
            <V::Scope as super::resource::KindScope>::NAMESPACED,
        ))
    }

    /// Adds a transform applied to every object before it is cached; the transforms set on a
    /// kind replace the default, [`drop_managed_fields`](super::drop_managed_fields), which they
    /// do not also apply unless they call it. Fails once started, so the cache never mixes
    /// transformed and raw objects.
    ///
    /// A metadata view's transform changes the metadata of whatever the informer stores. A full
    /// view's transform applies when the informer stores this type; the informer then fails to
    /// start if it stores another full type (two views of one kind with transforms of their
    /// own), and skips it when every user of the kind wants metadata only.
    pub fn set_transform(
        &self,
        f: impl Fn(&mut V) + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        let transform = ViewTransform::of::<V>(f);
        self.shared.add_transform(transform)
    }

    /// Starts the informer on `stream` as its only watch, storing objects as `V` (a synthetic
    /// stream in tests); fails if already started or when called outside a Tokio runtime.
    #[cfg(test)]
    pub(crate) fn start_with_stream<S>(
        &self,
        stream: S,
        shutdown: &tokio_util::sync::CancellationToken,
    ) -> Result<(), InformerError>
    where
        S: futures::Stream<
                Item = Result<kube_runtime::watcher::Event<V>, kube_runtime::watcher::Error>,
            > + Send
            + 'static,
    {
        tokio::runtime::Handle::try_current().map_err(|_| InformerError::NoRuntime {
            informer: self.shared.describe(),
        })?;
        self.shared.mark_started()?;
        let transform = self
            .shared
            .transform_for::<V>()
            .expect("a view's own transforms apply to it");
        let rt = self.shared.run(&[None], shutdown)?;
        self.shared.drive(&rt, 0, stream, transform);
        Ok(())
    }
}

impl<V: Send + Sync + 'static> Informer<V> {
    /// The cache this informer keeps, as `V`; cheap to clone and safe to read from any task.
    pub fn store(&self) -> Store<V> {
        Store::new(self.shared.store.clone(), Arc::clone(&self.view))
    }

    /// Subscribes a handler with the factory's default resync period. Registering after start
    /// replays the current contents as `Added` first, like client-go's `AddEventHandler`.
    ///
    /// Keep the returned registration (or [`detach`](HandlerRegistration::detach) it): dropping
    /// it unsubscribes, so `let _ = informer.add_handler(..)` subscribes nothing.
    pub fn add_handler(&self, handler: impl EventHandler<V>) -> HandlerRegistration {
        self.register(handler, self.shared.default_resync)
    }

    /// Subscribes a handler that additionally receives every cached object as `Updated` with
    /// old == new each `resync` period (zero disables; below one second is raised to one second).
    pub fn add_handler_with_resync(
        &self,
        handler: impl EventHandler<V>,
        resync: Duration,
    ) -> HandlerRegistration {
        self.register(handler, Some(resync))
    }

    fn register(
        &self,
        handler: impl EventHandler<V>,
        resync: Option<Duration>,
    ) -> HandlerRegistration {
        let handler = ViewHandler {
            view: Arc::clone(&self.view),
            handler,
        };
        self.shared.register(Box::new(handler), resync)
    }

    /// Adds a named index queried with [`Store::by_index`]. Fails once started or if the name is
    /// taken (the `namespace` index exists from the start).
    pub fn add_index(
        &self,
        name: &str,
        f: impl Fn(&V) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        let view = Arc::clone(&self.view);
        self.shared.add_index(
            name,
            Arc::new(move |obj: &dyn Object| view.with(obj, &f).unwrap_or_default()),
        )
    }

    /// True once the first complete list is in the store (client-go's `HasSynced`); handlers may
    /// still be catching up, see [`HandlerRegistration::has_synced`].
    pub fn has_synced(&self) -> bool {
        self.shared.has_synced()
    }

    /// Waits until the first complete list is in the store. Returns false if the informer
    /// stopped (shutdown, or it can never list) before it ever synced, so callers do not wait
    /// forever.
    pub async fn wait_for_sync(&self) -> bool {
        let mut rx = self.shared.sync_state.subscribe();
        match rx
            .wait_for(|s| s.synced || s.stopped || s.failed.is_some())
            .await
        {
            Ok(state) => state.synced,
            Err(_) => false,
        }
    }

    /// Number of watch or list failures so far; a climbing count with `synced == false` is what
    /// /readyz reports.
    pub fn watch_errors(&self) -> u64 {
        self.shared.watch_errors()
    }

    /// Whether the kind is namespaced; `None` for a kind given at run time until discovery has
    /// found it.
    pub fn namespaced(&self) -> Option<bool> {
        self.shared.namespaced()
    }

    /// Whether [`SharedInformerFactory::start`](super::SharedInformerFactory::start) has started
    /// it; an informer requested after `start` needs another `start`.
    pub fn is_started(&self) -> bool {
        self.shared.is_started()
    }
}
