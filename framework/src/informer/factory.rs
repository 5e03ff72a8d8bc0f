//! Owns [`SharedInformerFactory`]: the process-wide registry that hands every controller the
//! same [`Informer`] for the same kind and scope, starts them together, and reports their sync
//! state for start-up gating and /readyz.

use std::any::{Any, TypeId};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube_runtime::watcher;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::SyncError;
use super::backoff::with_backoff;
use super::resource::{InformerResource, ScopedApi};
use super::scope::InformerScope;
use super::shared::{Informer, SyncState};
use super::watch_list;

/// The one cache every controller in the process shares: the first request for a kind and scope
/// creates its informer, later requests get the same one (client-go's `SharedInformerFactory`).
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
    config: Mutex<FactoryConfig>,
    informers: Mutex<Vec<Entry>>,
}

#[derive(Clone, Debug)]
struct FactoryConfig {
    default_resync: Option<Duration>,
    list: ListMode,
    /// Streaming lists first (client-go's `WatchListClient`, on by default as since 1.35).
    watch_list: bool,
}

impl Default for FactoryConfig {
    fn default() -> Self {
        FactoryConfig {
            default_resync: None,
            list: ListMode::default(),
            watch_list: true,
        }
    }
}

/// How informers LIST (without streaming lists, or after falling back from them); chosen per
/// factory because it is a property of the API server and the deployment, not of the objects
/// wanted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum ListMode {
    /// `resourceVersion=0`, unpaged: served from the API server's watch cache, like client-go's
    /// reflector. kube-client drops `resourceVersion=0` whenever a page size is set, so this
    /// mode must not page.
    #[default]
    WatchCache,
    /// Quorum reads from etcd in pages of this size.
    Paged(u32),
}

struct Entry {
    type_id: TypeId,
    scope: InformerScope,
    informer: Box<dyn ErasedInformer>,
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
    /// Whether its first complete list is in the store.
    pub synced: bool,
    /// List/watch failures so far (each one is retried with backoff).
    pub watch_errors: u64,
    /// Objects currently cached.
    pub objects: usize,
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
                config: Mutex::new(FactoryConfig::default()),
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

    /// The client informers use, so controllers built from the factory write through the same one.
    pub fn client(&self) -> Client {
        self.inner.client.clone()
    }

    /// The shared informer for every object of kind `K`.
    pub fn informer<K: InformerResource>(&self) -> Informer<K> {
        self.informer_for(InformerScope::all())
    }

    /// The shared informer for the objects of kind `K` in `scope`, created on first request.
    ///
    /// A namespace on a cluster-scoped kind is ignored (with a warning), so it shares the
    /// cluster-wide informer instead of creating a second watch.
    pub fn informer_for<K: InformerResource>(&self, scope: InformerScope) -> Informer<K> {
        let mut scope = scope.normalized();
        if !<K::Scope as ScopedApi>::NAMESPACED && scope.namespace.is_some() {
            tracing::warn!(kind = %kind_label::<K>(), "namespace ignored for a cluster-scoped kind");
            scope.namespace = None;
        }
        let type_id = TypeId::of::<K>();
        let mut informers = self.inner.informers.lock();
        if let Some(existing) = informers
            .iter()
            .filter(|e| e.type_id == type_id && e.scope == scope)
            .find_map(|e| e.informer.as_any().downcast_ref::<Informer<K>>())
        {
            return existing.clone();
        }
        let default_resync = self.inner.config.lock().default_resync;
        let informer = Informer::<K>::new(kind_label::<K>(), scope.clone(), default_resync);
        informers.push(Entry {
            type_id,
            scope,
            informer: Box::new(informer.clone()),
        });
        informer
    }

    /// Starts every informer requested so far and not yet started; call it again after
    /// requesting more (as client-go's `Start`). Informers stop when `shutdown` is cancelled.
    pub fn start(&self, shutdown: CancellationToken) {
        let config = self.inner.config.lock().clone();
        let informers = self.inner.informers.lock();
        for entry in informers.iter().filter(|e| !e.informer.is_started()) {
            entry.informer.start(&self.inner.client, &config, &shutdown);
        }
    }

    /// Waits until every started informer has its first complete list, or fails naming the ones
    /// that have not (client-go's `WaitForCacheSync`, with a deadline).
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), SyncError> {
        let started: Vec<(String, watch::Receiver<SyncState>)> = self
            .inner
            .informers
            .lock()
            .iter()
            .filter(|e| e.informer.is_started())
            .map(|e| (e.informer.describe(), e.informer.sync_state()))
            .collect();
        tracing::info!(informers = started.len(), "waiting for caches to sync");
        let waits = started.iter().map(|(_, rx)| {
            let mut rx = rx.clone();
            async move {
                let _ = rx.wait_for(|s| s.synced || s.stopped).await;
            }
        });
        let timed_out = tokio::time::timeout(timeout, futures::future::join_all(waits))
            .await
            .is_err();
        let unsynced: Vec<String> = started
            .iter()
            .filter(|(_, rx)| !rx.borrow().synced)
            .map(|(name, _)| name.clone())
            .collect();
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
            .map(|e| e.informer.status())
            .collect()
    }
}

/// `Kind` for the core group, `Kind.group` otherwise, as kubectl names resources.
fn kind_label<K: InformerResource>() -> String {
    let group = K::group(&());
    if group.is_empty() {
        K::kind(&()).into_owned()
    } else {
        format!("{}.{}", K::kind(&()), group)
    }
}

/// The type-independent operations the factory needs on each informer.
trait ErasedInformer: Send + Sync {
    /// For handing the typed informer back out of the registry.
    fn as_any(&self) -> &dyn Any;
    fn start(&self, client: &Client, config: &FactoryConfig, shutdown: &CancellationToken);
    fn is_started(&self) -> bool;
    fn describe(&self) -> String;
    fn sync_state(&self) -> watch::Receiver<SyncState>;
    fn status(&self) -> InformerStatus;
}

impl<K: InformerResource> ErasedInformer for Informer<K> {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start(&self, client: &Client, factory: &FactoryConfig, shutdown: &CancellationToken) {
        let scope = &self.shared.scope;
        let mut config = watcher::Config::default();
        if let Some(labels) = &scope.label_selector {
            config = config.labels(labels);
        }
        if let Some(fields) = &scope.field_selector {
            config = config.fields(fields);
        }
        config = match factory.list {
            ListMode::WatchCache => {
                let mut config = config.any_semantic();
                config.page_size = None;
                config
            }
            ListMode::Paged(page_size) => config.page_size(page_size),
        };
        // Each informer's watcher gets its own throttle, so one resource whose watches are cut
        // does not slow the others down.
        // (Building a client spawns its request buffer, so only inside a runtime; without one
        // `start_with_stream` reports the missing runtime instead of panicking here.)
        let client = if tokio::runtime::Handle::try_current().is_ok() {
            super::watch_throttle::WatchThrottle::client(client)
        } else {
            client.clone()
        };
        let api = <K::Scope as ScopedApi>::api::<K>(client, scope.namespace.as_deref());
        let result = if factory.watch_list {
            let list_watch = {
                let (api, config) = (api.clone(), config.clone());
                move || watcher(api, config).boxed()
            };
            let stream = watch_list::stream(api, config, self.shared.describe(), list_watch);
            self.start_with_stream(with_backoff(stream), shutdown)
        } else {
            self.start_with_stream(with_backoff(watcher(api, config)), shutdown)
        };
        if let Err(error) = result {
            tracing::error!(%error, "informer not started");
        }
    }

    fn is_started(&self) -> bool {
        Informer::is_started(self)
    }

    fn describe(&self) -> String {
        self.shared.describe()
    }

    fn sync_state(&self) -> watch::Receiver<SyncState> {
        self.shared.sync_state.subscribe()
    }

    fn status(&self) -> InformerStatus {
        InformerStatus {
            kind: self.shared.kind.clone(),
            scope: self.shared.scope.clone(),
            started: self.is_started(),
            synced: self.has_synced(),
            watch_errors: self.watch_errors(),
            objects: self.shared.store.len(),
        }
    }
}
