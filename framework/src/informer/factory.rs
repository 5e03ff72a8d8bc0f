//! Owns [`SharedInformerFactory`]: the process-wide registry that hands every controller the
//! same informer for the same kind and scope, whichever view it asks for (the kind's type, its
//! metadata, a `DynamicObject`), starts them together, and reports their sync state for
//! start-up gating and /readyz.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::core::GroupVersionKind;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::SyncError;
use super::dispatch::{Shared, SyncState};
use super::entry::Entry;
use super::kind::kind_label;
use super::open::{ListMode, WatchConfig};
use super::options::CacheOptions;
use super::reader::Reader;
use super::resource::{CacheResource, InformerResource, KindScope};
use super::scope::InformerScope;
use super::shared::Informer;

/// The one cache every controller in the process shares: the first request for a kind and scope
/// creates its informer, later requests get the same one (client-go's `SharedInformerFactory`),
/// as whichever view they ask for: `informer::<Secret>()`, `informer::<PartialObjectMeta<Secret>>()`
/// and `informer_with::<DynamicObject>(&dynamic_type("v1/Secret")?, ..)` share one WATCH.
#[derive(Clone)]
pub struct SharedInformerFactory {
    inner: Arc<FactoryInner>,
}

impl std::fmt::Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformerFactory")
            .field("informers", &self.informers_status())
            .finish()
    }
}

struct FactoryInner {
    client: Client,
    config: Mutex<WatchConfig>,
    cache: Mutex<CacheOptions>,
    informers: Mutex<Vec<Entry>>,
}

/// Health of one informer, for /readyz and for the "waiting for caches" log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InformerStatus {
    /// The kind, e.g. `Node` or `Lease.coordination.k8s.io`.
    pub kind: String,
    /// Which objects of the kind it caches.
    pub scope: InformerScope,
    /// Whether [`SharedInformerFactory::start`] has started it.
    pub started: bool,
    /// Whether it watches metadata only (every user of the kind wants only metadata); `None`
    /// before start.
    pub metadata_only: Option<bool>,
    /// Whether its first complete list is in the store.
    pub synced: bool,
    /// What it waits for: its kind is not served yet (a CRD not yet Established).
    pub waiting: Option<String>,
    /// Why it will never list (unknown kind, not listable, a selector the server refused).
    pub failed: Option<String>,
    /// List/watch failures so far (each one is retried with backoff).
    pub watch_errors: u64,
    /// Objects currently cached.
    pub objects: usize,
}

impl std::fmt::Display for InformerStatus {
    /// The kind and scope, and what it waits for or why it failed: the readiness check's words.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.kind)?;
        if !self.scope.is_everything() {
            write!(f, " ({})", self.scope)?;
        }
        match (&self.failed, &self.waiting) {
            (Some(why), _) => write!(f, " cannot start: {why}"),
            (None, Some(what)) => write!(f, " is waiting for {what}"),
            (None, None) => Ok(()),
        }
    }
}

impl SharedInformerFactory {
    /// Creates an empty factory whose informers list and watch through `client`.
    ///
    /// Lists use `resourceVersion=0` (served from the API server's watch cache, as client-go's
    /// reflector does), and handlers get no resync unless configured.
    pub fn new(client: Client) -> Self {
        Self {
            inner: Arc::new(FactoryInner {
                client,
                config: Mutex::new(WatchConfig::default()),
                cache: Mutex::new(CacheOptions::default()),
                informers: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Sets the resync period handlers get from [`Informer::add_handler`] (client-go's
    /// `defaultResync`; the CCM uses `--min-resync-period` × U[1,2)). Applies to informers created
    /// afterwards; `None` or zero disables.
    pub fn with_default_resync(self, period: Option<Duration>) -> Self {
        self.inner.config.lock().default_resync = period.filter(|p| !p.is_zero());
        self
    }

    /// Whether informers sync through streaming lists (one watch with `sendInitialEvents=true`,
    /// KEP-3157) before falling back to LIST + WATCH where the server does not serve them (the
    /// default, as client-go's `WatchListClient` since 1.35), or always LIST + WATCH (`false`).
    /// Streaming cuts the API server's and this process's memory peak on large clusters.
    pub fn with_watch_list(self, enabled: bool) -> Self {
        self.inner.config.lock().watch_list = enabled;
        self
    }

    /// Streaming lists, falling back to LIST + WATCH; the default, see [`Self::with_watch_list`].
    pub fn with_streaming_lists(self) -> Self {
        self.with_watch_list(true)
    }

    /// LISTs (without streaming lists, or after falling back from them) are quorum reads from
    /// etcd in pages of `page_size` instead of reads from the watch cache: never older than the
    /// last write, but heavier on etcd. (kube-client cannot combine paging with
    /// `resourceVersion=0`, so paging implies quorum reads.)
    pub fn with_page_size(self, page_size: u32) -> Self {
        self.inner.config.lock().list = ListMode::Paged(page_size.max(1));
        self
    }

    /// What the process caches of each kind (selectors, namespaces, uncached reads,
    /// transforms); applies to informers requested afterwards, so set it before any controller
    /// registers.
    pub fn with_cache_options(self, options: CacheOptions) -> Self {
        *self.inner.cache.lock() = options;
        self
    }

    /// The client informers use, so controllers built from the factory write through the same one.
    pub fn client(&self) -> Client {
        self.inner.client.clone()
    }

    /// The shared informer for every object of kind `K` (`PartialObjectMeta<K>`: their metadata).
    pub fn informer<K: InformerResource>(&self) -> Informer<K> {
        self.informer_for(InformerScope::all())
    }

    /// The shared informer for the objects of kind `K` in `scope`, created on first request.
    ///
    /// A namespace on a cluster-scoped kind is ignored (with a warning), so it shares the
    /// cluster-wide informer instead of creating a second watch.
    pub fn informer_for<K: InformerResource>(&self, scope: InformerScope) -> Informer<K> {
        self.informer_with::<K>(&(), scope)
    }

    /// The shared informer for the objects of the kind `dyntype` names in `scope`, as `V`: a
    /// compile-time type with `&()`, or a kind known at run time as `DynamicObject` (or
    /// `PartialObjectMeta<DynamicObject>`) with its `ApiResource`
    /// ([`dynamic_type`](super::dynamic_type)), resolved through discovery at start.
    ///
    /// Every view of one kind and scope is the same informer. Requested before start, it
    /// watches full objects if any view wants them and metadata only otherwise; a full view
    /// requested after its kind's metadata-only informer started gets an informer of its own
    /// (a second watch, with a warning).
    pub fn informer_with<V: CacheResource>(
        &self,
        dyntype: &V::DynamicType,
        scope: InformerScope,
    ) -> Informer<V> {
        let gvk =
            GroupVersionKind::gvk(&V::group(dyntype), &V::version(dyntype), &V::kind(dyntype));
        let cache = self.inner.cache.lock();
        let options = cache.get(&gvk.group, &gvk.kind);
        let mut scope = scope.normalized();
        if V::Scope::NAMESPACED == Some(false) && scope.namespace.is_some() {
            tracing::warn!(kind = %kind_label(&gvk.group, &gvk.kind), "namespace ignored for a cluster-scoped kind");
            scope.namespace = None;
        }
        if let Some(options) = options {
            scope = options.restrict(scope);
        }
        let mut informers = self.inner.informers.lock();
        let same = |e: &Entry| e.gvk == gvk && e.scope == scope;
        if let Some(entry) = informers.iter_mut().find(|e| same(e) && e.serves::<V>()) {
            entry.add_view::<V>(dyntype);
            return Informer::view_of(Arc::clone(&entry.shared));
        }
        if informers.iter().any(same) {
            tracing::warn!(
                kind = %kind_label(&gvk.group, &gvk.kind),
                %scope,
                "full objects asked for after the kind's metadata-only informer started: a second watch"
            );
        }
        let shared = Shared::new(
            kind_label(&gvk.group, &gvk.kind),
            scope.clone(),
            self.inner.config.lock().default_resync,
            V::Scope::NAMESPACED,
        );
        let informer = Informer::view_of(Arc::clone(&shared));
        informers.push(Entry::new::<V>(gvk, scope, options, shared, dyntype));
        informer
    }

    /// Reads every object of kind `K`: from the shared cache, or straight from the API server
    /// when the kind's [cache options](super::KindOptions::uncached) say so (no informer is
    /// opened for the reads then).
    pub fn reader<K: InformerResource>(&self) -> Reader<K> {
        self.reader_with::<K>(&(), InformerScope::all())
    }

    /// [`Self::reader`] for the objects of `scope`, as `V` (see [`Self::informer_with`]).
    pub fn reader_with<V: CacheResource>(
        &self,
        dyntype: &V::DynamicType,
        scope: InformerScope,
    ) -> Reader<V> {
        let uncached = self
            .inner
            .cache
            .lock()
            .get(&V::group(dyntype), &V::kind(dyntype))
            .is_some_and(|o| o.is_uncached());
        if uncached {
            return Reader::uncached(self.client(), dyntype.clone(), scope.normalized());
        }
        Reader::cached(self.informer_with::<V>(dyntype, scope).store())
    }

    /// Starts every informer requested so far and not yet started; call it again after
    /// requesting more (as client-go's `Start`). Informers stop when `shutdown` is cancelled.
    pub fn start(&self, shutdown: CancellationToken) {
        let config = self.inner.config.lock().clone();
        let mut informers = self.inner.informers.lock();
        for entry in informers.iter_mut() {
            entry.start(&self.inner.client, &config, &shutdown);
        }
    }

    /// Waits until every started informer has its first complete list, or fails naming the ones
    /// that have not (client-go's `WaitForCacheSync`, with a deadline) or never will (an
    /// unknown kind, a selector the server refused). An informer whose kind is not served yet
    /// does not hold the others up: it is logged, reported by /readyz, and starts once served.
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), SyncError> {
        let started: Vec<(String, watch::Receiver<SyncState>)> = self
            .inner
            .informers
            .lock()
            .iter()
            .filter(|e| e.shared.is_started())
            .map(|e| (e.shared.describe(), e.shared.sync_state.subscribe()))
            .collect();
        tracing::info!(informers = started.len(), "waiting for caches to sync");
        let waits = started.iter().map(|(_, rx)| {
            let mut rx = rx.clone();
            async move {
                let _ = rx.wait_for(SyncState::settled).await;
            }
        });
        let timed_out = tokio::time::timeout(timeout, futures::future::join_all(waits))
            .await
            .is_err();
        let mut failed = Vec::new();
        let mut unsynced = Vec::new();
        for (name, rx) in &started {
            let state = rx.borrow();
            match (&state.failed, &state.waiting) {
                (Some(why), _) => failed.push(format!("{name}: {why}")),
                (None, Some(what)) if !state.synced => {
                    tracing::warn!(informer = %name, waiting_for = %what, "informer waits for its kind; starting without it");
                }
                _ if !state.synced => unsynced.push(name.clone()),
                _ => {}
            }
        }
        if !failed.is_empty() {
            return Err(SyncError::Failed { failed });
        }
        match (unsynced.is_empty(), timed_out) {
            (true, _) => {
                tracing::info!("caches are synced");
                Ok(())
            }
            (false, true) => Err(SyncError::Timeout { timeout, unsynced }),
            (false, false) => Err(SyncError::Stopped { unsynced }),
        }
    }

    /// Per-informer status for /readyz and diagnostics, in creation order.
    pub fn informers_status(&self) -> Vec<InformerStatus> {
        self.inner
            .informers
            .lock()
            .iter()
            .map(|e| {
                let shared = &e.shared;
                let state = shared.sync_state.borrow().clone();
                InformerStatus {
                    kind: shared.kind.clone(),
                    scope: shared.scope.clone(),
                    started: shared.is_started(),
                    metadata_only: e.metadata_only(),
                    synced: state.synced,
                    waiting: state.waiting,
                    failed: state.failed,
                    watch_errors: shared.watch_errors(),
                    objects: shared.store.len(),
                }
            })
            .collect()
    }
}
