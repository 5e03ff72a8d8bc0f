//! The manager: selects controllers, optionally waits to lead, builds every selected controller,
//! starts the shared cache once all handlers are registered, waits for it, then runs the workers
//! until shutdown (or until one of them stops, which is fatal) and drains them within a deadline.
//! Work still running at the deadline, or at once when leadership is lost, is abandoned: the
//! controllers' workers and periodic loops drop it (see `ControllerScope::abandoned`) before `run`
//! returns, so nothing acts after the Lease is released or lost.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::config::ManagerConfig;
use super::config::ring_name;
use super::initializers::{InitError, Initializers, InitializersError};
use super::selection::{ControllerSelection, SelectionErrors};
use crate::admin::{AdminError, AdminServer, HealthChecks};
use crate::client::{ClientBuilder, ClientError};
use crate::events::Unwritten;
use crate::informer::{SharedInformerFactory, SyncError};
use crate::leader::{LeaderElectionConfig, LeaderElector, LeaderError, LeaderMetrics};
use crate::shard::ShardAssignment;
use crate::webhook::{WebhookServing, Webhooks};

/// Why the manager stopped with an error; each variant says what to change or what failed.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// `--controllers` named something unknown.
    #[error("{0}")]
    Selection(#[from] SelectionErrors),
    /// The initializer map itself is inconsistent (an embedder's mistake).
    #[error(transparent)]
    Initializers(#[from] InitializersError),
    /// A controller could not be built; start-up is aborted, as upstream.
    #[error("error starting controller {name:?}: {source}")]
    Init {
        /// Canonical name of the controller.
        name: String,
        /// What the initializer reported.
        source: InitError,
    },
    /// Caches did not fill within the sync timeout.
    #[error(transparent)]
    CacheSync(#[from] SyncError),
    /// Leader election failed or leadership was lost.
    #[error(transparent)]
    Leader(#[from] LeaderError),
    /// The health and metrics server could not start.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// The client of the shared informers could not be built.
    #[error("cannot build the shared informers' client: {0}")]
    Client(#[source] ClientError),
    /// A selected controller's start-up requirement is not met
    /// ([`super::Initializer::validate`]); found before anything started.
    #[error("cannot start: {}; nothing was started", .0.join("; "))]
    Requirements(Vec<String>),
    /// The hook set with [`Manager::with_start_hook`] failed; no controller was started.
    #[error("preparing to start controllers failed: {0}")]
    StartHook(#[source] InitError),
    /// `--sharded-controllers` named a controller that cannot run sharded.
    #[error("--sharded-controllers: {0}")]
    Sharding(String),
    /// `--shard-assignment` is neither `hash` nor `label`.
    #[error("--shard-assignment: {0}")]
    ShardAssignment(String),
    /// The webhook map, a webhook or the webhook server could not start.
    #[error("{0}")]
    Webhooks(String),
    /// A controller's task returned or panicked while the manager was running. The manager
    /// stops every other controller and returns, as upstream's process dies: a replica that
    /// keeps the Lease with a dead controller does that controller's work nowhere.
    #[error("controller {name:?} stopped while the manager was running: {reason}")]
    ControllerStopped {
        /// Canonical name of the controller.
        name: String,
        /// How its task ended ("its task returned", "panicked: ...").
        reason: String,
    },
}

/// Work that must happen on the leader before any controller starts (see
/// [`Manager::with_start_hook`]); gets the embedder's context, the client builder and the stop
/// token.
pub type StartHook<C> = Arc<
    dyn Fn(Arc<C>, ClientBuilder, CancellationToken) -> BoxFuture<'static, Result<(), InitError>>
        + Send
        + Sync,
>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RunningLabels {
    pub(super) name: String,
    pub(super) manager: String,
}

/// Owns the shared pieces of one process and runs its controllers.
pub struct Manager<C> {
    pub(super) config: ManagerConfig,
    pub(super) client: kube::Client,
    pub(super) clients: ClientBuilder,
    pub(super) initializers: Initializers<C>,
    pub(super) start_hook: Option<StartHook<C>>,
    pub(super) extra: Arc<C>,
    pub(super) registry: Arc<Mutex<Registry>>,
    pub(super) health: HealthChecks,
    pub(super) ready: HealthChecks,
    pub(super) live: HealthChecks,
    /// The event recorders initializers were given, flushed before `run` returns.
    pub(super) recorders: Arc<Mutex<Vec<Unwritten>>>,
    /// The webhooks the process may serve, and how (`None`: no webhook server).
    pub(super) webhooks: Webhooks<C>,
    pub(super) webhook_serving: Option<WebhookServing>,
    /// The one informer factory, made on first use (by the webhooks or the controllers).
    pub(super) factory: OnceLock<SharedInformerFactory>,
}

impl<C: Send + Sync + 'static> Manager<C> {
    /// A manager with no controllers yet; `extra` is handed to every initializer. Every
    /// controller gets `client` until [`Self::with_client_builder`] sets a builder.
    pub fn new(config: ManagerConfig, client: kube::Client, extra: C) -> Self {
        Manager {
            config,
            clients: ClientBuilder::shared(client.clone()),
            client,
            initializers: Initializers::new(),
            start_hook: None,
            extra: Arc::new(extra),
            registry: Arc::new(Mutex::new(Registry::default())),
            health: HealthChecks::new(),
            ready: HealthChecks::new(),
            live: HealthChecks::new(),
            recorders: Arc::default(),
            webhooks: Webhooks::new(),
            webhook_serving: None,
            factory: OnceLock::new(),
        }
    }

    /// Uses `registry` for `/metrics`, so metrics the embedder registered before building the
    /// manager (API client, cloud provider) are served with the manager's own.
    pub fn with_registry(mut self, registry: Arc<Mutex<Registry>>) -> Self {
        self.registry = registry;
        self
    }

    /// Gives each controller its own client from `clients` (and the shared informers the root
    /// client `<binary>/shared-informers`, as upstream).
    pub fn with_client_builder(mut self, clients: ClientBuilder) -> Self {
        self.clients = clients;
        self
    }

    /// Runs `hook` once the manager may start controllers (after the Lease is won, when leader
    /// election is on) and before the first initializer, as upstream calls
    /// `cloud.Initialize` only on the leader. An error aborts start-up like an initializer's.
    ///
    /// With [`ManagerConfig::warm_standby`] the hook still runs only on the leader, before any
    /// worker starts, but *after* the initializers (which ran on the standby to warm the cache):
    /// initializers must then not depend on anything the hook does.
    pub fn with_start_hook<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(Arc<C>, ClientBuilder, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), InitError>> + Send + 'static,
    {
        self.start_hook = Some(Arc::new(move |extra, clients, stop| {
            Box::pin(hook(extra, clients, stop))
        }));
        self
    }

    /// Replaces the initializer map (stock controllers plus the embedder's own).
    pub fn with_initializers(mut self, initializers: Initializers<C>) -> Self {
        self.initializers = initializers;
        self
    }

    /// The registry served on `/metrics`, for embedders' own metrics.
    pub fn registry(&self) -> Arc<Mutex<Registry>> {
        self.registry.clone()
    }

    /// Checks served on `/healthz`, so embedders can add their own.
    pub fn health_checks(&self) -> HealthChecks {
        self.health.clone()
    }

    /// Checks `--controllers`, `--sharded-controllers` and `--shard-assignment` against the map,
    /// and the selected controllers' start-up requirements ([`super::Initializer::validate`])
    /// against the context, without running anything.
    pub fn validate(&self) -> Result<ControllerSelection, ManagerError> {
        self.initializers.check()?;
        let selection =
            ControllerSelection::parse(&self.config.controllers, &self.initializers.known())?;
        self.sharded(&selection)?;
        self.shard_assignment()?;
        self.webhook_selection()?;
        let unmet = self
            .initializers
            .unmet_requirements(&selection, &self.extra);
        if !unmet.is_empty() {
            return Err(ManagerError::Requirements(unmet));
        }
        Ok(selection)
    }

    /// The `--shard-assignment` the rings use.
    pub(super) fn shard_assignment(&self) -> Result<ShardAssignment, ManagerError> {
        self.config
            .shard_assignment
            .parse()
            .map_err(ManagerError::ShardAssignment)
    }

    /// The canonical names of the sharded controllers, each known, selected and shardable.
    fn sharded(&self, selection: &ControllerSelection) -> Result<BTreeSet<String>, ManagerError> {
        let known = self.initializers.known();
        let mut names = BTreeSet::new();
        let mut errors = Vec::new();
        for entry in self
            .config
            .sharded_controllers
            .iter()
            .filter(|e| !e.is_empty())
        {
            let Some(name) = known.canonical(entry) else {
                errors.push(format!("{entry:?} is not a known controller"));
                continue;
            };
            let init = self.initializers.iter().find(|i| i.name == name);
            if !selection.is_enabled(name) {
                errors.push(format!("{entry:?} is not enabled by --controllers"));
            } else if let Some(Err(reason)) = init.map(|i| &i.shardable) {
                errors.push(format!("{entry:?} cannot run sharded: {reason}"));
            } else if ring_name(&self.config.name, name).len() > MAX_RING_NAME {
                errors.push(format!(
                    "{entry:?}: its ring name {:?} is longer than {MAX_RING_NAME} characters (a label value); shorten the manager's name",
                    ring_name(&self.config.name, name)
                ));
            } else {
                names.insert(name.to_string());
            }
        }
        if errors.is_empty() {
            Ok(names)
        } else {
            Err(ManagerError::Sharding(super::selection::listed(
                &errors, "; ",
            )))
        }
    }

    /// Runs until `shutdown` is cancelled (or leadership is lost), then drains.
    ///
    /// Dropping the returned future (an embedder's `select!`, an aborted task) stops what it
    /// started as a cancellation would: the informers and workers run in spawned tasks that would
    /// otherwise go on reconciling without a lease.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ManagerError> {
        let selection = self.validate()?;
        let this = Arc::new(self);
        let shutdown = shutdown.child_token();
        let _stop_on_drop = shutdown.clone().drop_guard();
        let stopping = stopping_since(&shutdown);

        // The admin server outlives the drain: `/readyz` answers "failing" (the webhook server's
        // check fails once `shutdown` fires) while reviews in flight are answered, so the
        // replica leaves the Service's endpoints visibly instead of its port just closing.
        let admin_stop = CancellationToken::new();
        let _stop_admin_on_drop = admin_stop.clone().drop_guard();
        let admin_task = match this.config.admin_addr {
            Some(addr) => {
                let admin = &this.config.admin;
                let mut server = AdminServer::new_shared(
                    addr,
                    admin.sharing,
                    this.health.clone(),
                    this.ready.clone(),
                    this.live.clone(),
                    this.registry.clone(),
                )?
                .with_configz(admin.configz.clone())
                .with_profiling(admin.profiling.clone());
                if let Some(cert) = &this.config.admin_tls {
                    server = server.secure(cert, admin).await?;
                }
                info!(addr = %server.local_addr(), "serving health and metrics");
                Some(tokio::spawn(server.serve(admin_stop.clone())))
            }
            None => None,
        };

        // Every replica serves its webhooks, leader or not, from before the campaign until the
        // controllers drained.
        let webhook_stop = CancellationToken::new();
        let _stop_webhooks_on_drop = webhook_stop.clone().drop_guard();
        let webhook_task = match this.start_webhooks(&shutdown, &webhook_stop).await {
            Ok(task) => task,
            Err(error) => {
                admin_stop.cancel();
                return Err(error);
            }
        };

        let sharded = this.sharded(&selection)?;
        this.shard_assignment()?;
        let result = match this.config.leader_election.clone() {
            None if sharded.is_empty() => {
                this.clone()
                    .run_controllers(selection, shutdown.clone(), || false)
                    .await
            }
            Some(cfg) if sharded.is_empty() && !this.config.warm_standby => {
                this.clone()
                    .run_cold(selection, cfg, shutdown.clone())
                    .await
            }
            cfg => {
                this.clone()
                    .run_warm(selection, sharded, cfg, shutdown.clone())
                    .await
            }
        };

        // After the Lease is released, so writing events never delays a standby's takeover.
        shutdown.cancel();
        this.flush_events(stopping).await;
        webhook_stop.cancel();
        if let Some(task) = webhook_task {
            let _ = task.await;
        }
        admin_stop.cancel();
        if let Some(task) = admin_task {
            let _ = task.await;
        }
        result
    }

    /// A client for Lease renewals, with a QPS limiter of its own (upstream's `leader-election`
    /// client): controllers that spend the process's QPS cannot delay a renewal past the renew
    /// deadline. A claim storm in label mode did, and cost the replica its shard.
    pub(super) fn lease_client(&self) -> Result<kube::Client, ManagerError> {
        self.clients
            .root_client("leader-election")
            .map_err(ManagerError::Client)
    }

    /// The elector for `cfg`, with its metrics registered and its `leaderElection` health check.
    pub(super) fn elector(&self, cfg: LeaderElectionConfig) -> Result<LeaderElector, ManagerError> {
        let metrics = LeaderMetrics::register(&mut self.registry.lock());
        let elector = LeaderElector::new(self.lease_client()?, cfg)?.with_metrics(metrics);
        self.health
            .add_check("leaderElection", elector.status().health_check());
        Ok(elector)
    }

    /// Campaigns, and on winning the Lease runs every controller cold ([`Self::run_controllers`]).
    async fn run_cold(
        self: Arc<Self>,
        selection: ControllerSelection,
        cfg: LeaderElectionConfig,
        shutdown: CancellationToken,
    ) -> Result<(), ManagerError> {
        let elector = self.elector(cfg)?;
        let status = elector.status();
        let outcome = Arc::new(Mutex::new(Ok(())));
        let slot = outcome.clone();
        let me = self.clone();
        let stop_leading = shutdown.clone();
        let led = elector
            .run(shutdown.clone(), move |leading| {
                Box::pin(async move {
                    // The elector says "not leader" before it cancels `leading` on loss.
                    let lost = move || !status.is_leader();
                    let r = me.run_controllers(selection, leading, lost).await;
                    *slot.lock() = r;
                    // Whatever ended the controllers (a start-up error, a dead controller,
                    // shutdown), nothing is left to lead: stop renewing and release the Lease so
                    // a standby takes over, instead of holding it idle.
                    stop_leading.cancel();
                })
            })
            .await;
        let ran = std::mem::replace(&mut *outcome.lock(), Ok(()));
        led.map_err(ManagerError::from).and(ran)
    }

    /// Cold start, after the Lease is won (or without leader election): start hook, registration,
    /// cache sync, workers, all under `stop`. Every return cancels `stop`, so the informers and
    /// anything started so far end with it.
    async fn run_controllers(
        self: Arc<Self>,
        selection: ControllerSelection,
        stop: CancellationToken,
        lost: impl Fn() -> bool,
    ) -> Result<(), ManagerError> {
        let _stop_on_return = stop.clone().drop_guard();
        self.run_start_hook(&stop).await?;
        let registered = self.register(&selection, &BTreeSet::new(), &stop).await?;
        if !self.sync_caches(&registered.factory, &stop).await? {
            return Ok(());
        }
        self.start_workers(registered, &stop, lost).await
    }

    /// Writes what every recorder still holds, for at most
    /// [`ManagerConfig::event_flush_timeout`] and within what the drain left of
    /// [`ManagerConfig::graceful_shutdown_timeout`] (counted from `stopping`); what is still
    /// unwritten then is counted in `events_dropped_total`.
    async fn flush_events(&self, stopping: JoinHandle<Instant>) {
        let since = stopping.await.unwrap_or_else(|_| Instant::now());
        let left = self
            .config
            .graceful_shutdown_timeout
            .saturating_sub(since.elapsed())
            .min(self.config.event_flush_timeout);
        let recorders = std::mem::take(&mut *self.recorders.lock());
        // Each recorder logs what it drops.
        futures::future::join_all(recorders.iter().map(|r| r.flush_within(left))).await;
    }

    /// Runs the hook set with [`Self::with_start_hook`], if any.
    pub(super) async fn run_start_hook(
        &self,
        stop: &CancellationToken,
    ) -> Result<(), ManagerError> {
        match &self.start_hook {
            Some(hook) => hook(self.extra.clone(), self.clients.clone(), stop.clone())
                .await
                .map_err(ManagerError::StartHook),
            None => Ok(()),
        }
    }
}

/// A ring's name is a label value: at most 63 characters.
const MAX_RING_NAME: usize = 63;

/// When `shutdown` fired; awaited once it has.
fn stopping_since(shutdown: &CancellationToken) -> JoinHandle<Instant> {
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        shutdown.cancelled().await;
        Instant::now()
    })
}

/// The `/readyz` check a warm standby adds once its caches synced and removes on winning the
/// Lease: `[+]warm-standby ok` says the replica is ready to take over, not that it leads.
pub(super) const WARM_STANDBY_CHECK: &str = "warm-standby";
