//! The manager: selects controllers, optionally waits to lead, builds every selected controller,
//! starts the shared cache once all handlers are registered, waits for it, then runs the workers
//! until shutdown (or until one of them stops, which is fatal) and drains them within a deadline.
//! Work still running at the deadline, or at once when leadership is lost, is abandoned: the
//! controllers' workers and periodic loops drop it (see `ControllerScope::abandoned`) before `run`
//! returns, so nothing acts after the Lease is released or lost.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::config::ManagerConfig;
use super::context::{InitContext, Shared};
use super::initializers::{InitError, InitOutcome, Initializers, InitializersError};
use super::selection::{ControllerSelection, SelectionErrors};
use crate::admin::{AdminError, AdminServer, HealthChecks};
use crate::client::{ClientBuilder, ClientError};
use crate::controller::ControllerScope;
use crate::controller::layers::ControllerMetrics;
use crate::informer::{SharedInformerFactory, SyncError};
use crate::leader::{LeaderElector, LeaderError, LeaderMetrics};
use crate::panic_guard::guard;
use crate::workqueue::{TokenBucket, WorkQueueMetrics};

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
    /// The hook set with [`Manager::with_start_hook`] failed; no controller was started.
    #[error("preparing to start controllers failed: {0}")]
    StartHook(#[source] InitError),
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
struct RunningLabels {
    name: String,
    manager: String,
}

/// Owns the shared pieces of one process and runs its controllers.
pub struct Manager<C> {
    config: ManagerConfig,
    client: kube::Client,
    clients: ClientBuilder,
    initializers: Initializers<C>,
    start_hook: Option<StartHook<C>>,
    extra: Arc<C>,
    registry: Arc<Mutex<Registry>>,
    health: HealthChecks,
    ready: HealthChecks,
    live: HealthChecks,
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

    /// Checks `--controllers` against the map without running anything.
    pub fn validate(&self) -> Result<ControllerSelection, ManagerError> {
        self.initializers.check()?;
        Ok(ControllerSelection::parse(
            &self.config.controllers,
            &self.initializers.known(),
        )?)
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

        let admin_stop = shutdown.child_token();
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
                .with_configz(admin.configz.clone());
                if let Some(cert) = &this.config.admin_tls {
                    server = server.secure(cert, admin).await?;
                }
                info!(addr = %server.local_addr(), "serving health and metrics");
                Some(tokio::spawn(server.serve(admin_stop.clone())))
            }
            None => None,
        };

        let result = match this.config.leader_election.clone() {
            None => {
                this.clone()
                    .run_controllers(selection, shutdown.clone(), || false)
                    .await
            }
            Some(cfg) => {
                let metrics = LeaderMetrics::register(&mut this.registry.lock());
                let elector = LeaderElector::new(this.client.clone(), cfg)?.with_metrics(metrics);
                let status = elector.status();
                this.health
                    .add_check("leaderElection", status.health_check());
                let outcome = Arc::new(Mutex::new(Ok(())));
                let slot = outcome.clone();
                let me = this.clone();
                let stop_leading = shutdown.clone();
                let led = elector
                    .run(shutdown.clone(), move |leading| {
                        Box::pin(async move {
                            // The elector says "not leader" before it cancels `leading` on loss.
                            let lost = move || !status.is_leader();
                            let r = me.run_controllers(selection, leading, lost).await;
                            *slot.lock() = r;
                            // Whatever ended the controllers (a start-up error, a dead
                            // controller, shutdown), nothing is left to lead: stop renewing and
                            // release the Lease so a standby takes over, instead of holding it idle.
                            stop_leading.cancel();
                        })
                    })
                    .await;
                let ran = std::mem::replace(&mut *outcome.lock(), Ok(()));
                led.map_err(ManagerError::from).and(ran)
            }
        };

        admin_stop.cancel();
        if let Some(task) = admin_task {
            let _ = task.await;
        }
        result
    }

    /// Starts the selected controllers and runs them until `stop`; `lost()` tells, once `stop`
    /// fired, whether leadership was lost (in-flight work is then dropped at once, not drained).
    /// Every return cancels `stop`, so the informers and anything started so far end with it.
    async fn run_controllers(
        self: Arc<Self>,
        selection: ControllerSelection,
        stop: CancellationToken,
        lost: impl Fn() -> bool,
    ) -> Result<(), ManagerError> {
        let _stop_on_return = stop.clone().drop_guard();
        let informer_client = self
            .clients
            .root_client("shared-informers")
            .map_err(ManagerError::Client)?;
        let factory = SharedInformerFactory::new(informer_client)
            .with_default_resync(self.config.min_resync_period.map(jittered));
        let shared = {
            let mut registry = self.registry.lock();
            Arc::new(Shared {
                queue_metrics: WorkQueueMetrics::new(&mut registry),
                controller_metrics: ControllerMetrics::new(&mut registry),
                retry_bucket: TokenBucket::new(10.0, 100),
                registry: self.registry.clone(),
                host: crate::leader::host_name(),
                event_counters: Default::default(),
            })
        };
        let running: Family<RunningLabels, Gauge> = Family::default();
        self.registry.lock().register(
            "running_managed_controllers",
            "Indicates where instances of a controller are currently running",
            running.clone(),
        );

        if let Some(hook) = &self.start_hook
            && let Err(source) = hook(self.extra.clone(), self.clients.clone(), stop.clone()).await
        {
            return Err(ManagerError::StartHook(source));
        }

        let mut started = Vec::new();
        for init in self.initializers.iter() {
            if !selection.is_enabled(&init.name) {
                warn!(controller = %init.name, "controller is disabled");
                continue;
            }
            let ctx = InitContext {
                name: init.name.clone(),
                client: self.client.clone(),
                clients: self.clients.clone(),
                factory: factory.clone(),
                shutdown: stop.clone(),
                extra: self.extra.clone(),
                shared: shared.clone(),
            };
            info!(controller = %init.name, "starting controller");
            match (init.init)(ctx).await {
                Ok(InitOutcome::Started(run)) => {
                    let metric_name = init.aliases.first().unwrap_or(&init.name).clone();
                    started.push((init.name.clone(), metric_name, run));
                }
                Ok(InitOutcome::NotStarted(reason)) => {
                    warn!(controller = %init.name, %reason, "Skipping controller");
                }
                Err(source) => {
                    return Err(ManagerError::Init {
                        name: init.name.clone(),
                        source,
                    });
                }
            }
            if !self.config.controller_start_interval.is_zero() {
                tokio::time::sleep(jittered(self.config.controller_start_interval)).await;
            }
        }

        factory.start(stop.clone());
        {
            let f = factory.clone();
            self.ready.add_check("informer-sync", move || {
                let unsynced: Vec<String> = f
                    .informers_status()
                    .into_iter()
                    .filter(|s| !s.synced)
                    .map(|s| s.kind)
                    .collect();
                if unsynced.is_empty() {
                    Ok(())
                } else {
                    Err(format!("not synced: {}", unsynced.join(", ")))
                }
            });
        }
        tokio::select! {
            r = factory.wait_for_sync(self.config.cache_sync_timeout) => r?,
            _ = stop.cancelled() => return Ok(()),
        }
        info!("caches are synced");

        // A JoinSet, not detached tasks: when in-flight work is abandoned (or this future is
        // dropped) every controller still running is stopped, so no reconcile goes on acting after
        // the manager returned and the Lease was released.
        let abandon = CancellationToken::new();
        let mut tasks = JoinSet::new();
        for (name, metric_name, run) in started {
            let labels = RunningLabels {
                name: metric_name,
                manager: self.config.name.clone(),
            };
            // Panics, like the reconcile metrics and the health check, carry the canonical
            // name; only running_managed_controllers keeps upstream's alias label.
            let scope = ControllerScope::new(
                &name,
                shared.controller_metrics.panics(&name),
                abandon.clone(),
            );
            let check = scope.clone();
            self.health.add_check(&name, move || check.check());
            let gauge = running.get_or_create_owned(&labels);
            gauge.set(1);
            let stop = stop.clone();
            tasks.spawn(async move {
                let ended = scope.clone().scope(guard(run)).await;
                gauge.set(0);
                let reason = match ended {
                    Ok(()) => "its task returned".to_owned(),
                    Err(panicked) => panicked.to_string(),
                };
                if !stop.is_cancelled() {
                    scope.exited(&reason);
                }
                (name, reason)
            });
        }

        let stopped = tokio::select! {
            biased;
            () = stop.cancelled() => None,
            // Panics are caught inside the task; a join error means it was aborted from outside.
            Some(joined) = tasks.join_next() => Some(
                joined.unwrap_or_else(|e| ("a controller".to_owned(), e.to_string())),
            ),
        };
        if let Some((name, reason)) = &stopped {
            error!(controller = %name, %reason, "controller stopped while the manager was running; stopping the manager");
            stop.cancel();
        }
        if lost() {
            warn!("leadership lost: abandoning in-flight reconciles");
            abandon_all(&mut tasks, &abandon).await;
        } else {
            info!("shutting down: draining in-flight reconciles");
            let timeout = self.config.graceful_shutdown_timeout;
            let drained = tokio::time::timeout(timeout, join_all(&mut tasks)).await;
            if drained.is_err() {
                warn!(
                    ?timeout,
                    abandoned = tasks.len(),
                    "graceful shutdown timed out; abandoning in-flight reconciles"
                );
                abandon_all(&mut tasks, &abandon).await;
            }
        }
        match stopped {
            Some((name, reason)) => Err(ManagerError::ControllerStopped { name, reason }),
            None => Ok(()),
        }
    }
}

/// How long controllers get to drop their in-flight work once told to, before their tasks are
/// aborted outright (which stops them at their next await without waiting for their workers).
const ABANDON_WAIT: Duration = Duration::from_secs(1);

/// Tells every controller to drop its in-flight work and waits until their tasks are gone.
async fn abandon_all(tasks: &mut JoinSet<(String, String)>, abandon: &CancellationToken) {
    abandon.cancel();
    if tokio::time::timeout(ABANDON_WAIT, join_all(tasks))
        .await
        .is_err()
    {
        warn!(
            remaining = tasks.len(),
            "controllers did not drop their work in time; aborting their tasks"
        );
        tasks.shutdown().await;
    }
}

async fn join_all(tasks: &mut JoinSet<(String, String)>) {
    while tasks.join_next().await.is_some() {}
}

/// `base × U[1,2)`, as client-go spreads resyncs and controller starts.
fn jittered(base: Duration) -> Duration {
    base.mul_f64(1.0 + rand::random::<f64>())
}
