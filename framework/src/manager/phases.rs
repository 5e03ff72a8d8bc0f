//! The three phases of running controllers, kept apart so they can run at different moments:
//! [`Manager::register`] (every selected initializer registers its informers and handlers and
//! hands back its workers' future, unpolled), [`Manager::sync_caches`] (start the shared informers
//! and wait for them) and [`Manager::start_workers`] (poll the workers until shutdown, a dead
//! controller or lost leadership, then drain or abandon them).
//!
//! A cold manager runs all three after winning the Lease; a warm standby runs the first two while
//! waiting for it (see `run.rs`). Sharded controllers are registered with the rest, each with its
//! ring, and [`Registered::split`] hands their workers to a [`Manager::start_workers`] that does
//! not wait for the Lease; that call also keeps each ring's membership while its workers run.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::future::BoxFuture;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::config::ring_name;
use super::context::{InitContext, Shared};
use super::initializers::InitOutcome;
use super::run::{Manager, ManagerError, RunningLabels};
use super::selection::ControllerSelection;
use crate::controller::ControllerScope;
use crate::controller::layers::ControllerMetrics;
use crate::informer::SharedInformerFactory;
use crate::leader::{LeaderElectionConfig, default_identity};
use crate::panic_guard::guard;
use crate::shard::{DEFAULT_VNODES, Ring, RingConfig, RingMetrics};
use crate::workqueue::{TokenBucket, WorkQueueMetrics};

/// One controller whose initializer registered it; its workers have not been polled yet.
pub(super) struct Pending {
    name: String,
    metric_name: String,
    run: BoxFuture<'static, ()>,
    /// Its ring, when it runs sharded.
    ring: Option<Ring>,
}

/// What the registration phase produced: the shared cache (not started) and each controller's
/// workers.
pub(super) struct Registered {
    pub(super) factory: SharedInformerFactory,
    shared: std::sync::Arc<Shared>,
    running: Family<RunningLabels, Gauge>,
    controllers: Vec<Pending>,
}

impl Registered {
    /// The sharded controllers (run on every replica) and the others (run on the Lease holder),
    /// over the same cache.
    pub(super) fn split(self) -> (Registered, Registered) {
        let (sharded, leading) = self.controllers.into_iter().partition(|p| p.ring.is_some());
        let part = |controllers| Registered {
            factory: self.factory.clone(),
            shared: self.shared.clone(),
            running: self.running.clone(),
            controllers,
        };
        (part(sharded), part(leading))
    }

    /// Whether no controller is in this part.
    pub(super) fn is_empty(&self) -> bool {
        self.controllers.is_empty()
    }
}

impl<C: Send + Sync + 'static> Manager<C> {
    /// Runs every selected initializer against one new informer factory. `stop` is the token the
    /// controllers see as their shutdown: their workers and loops end when it fires.
    pub(super) async fn register(
        &self,
        selection: &ControllerSelection,
        sharded: &BTreeSet<String>,
        stop: &CancellationToken,
    ) -> Result<Registered, ManagerError> {
        let informer_client = self
            .clients
            .root_client("shared-informers")
            .map_err(ManagerError::Client)?;
        let factory = SharedInformerFactory::new(informer_client)
            .with_default_resync(self.config.min_resync_period.map(jittered))
            .with_watch_list(self.config.watch_list)
            .with_cache_options(self.config.cache.clone());
        let shared = {
            let mut registry = self.registry.lock();
            std::sync::Arc::new(Shared {
                queue_metrics: WorkQueueMetrics::new(&mut registry),
                controller_metrics: ControllerMetrics::new(&mut registry),
                retry_bucket: TokenBucket::new(10.0, 100),
                registry: self.registry.clone(),
                host: crate::leader::host_name(),
                event_counters: Default::default(),
                recorders: self.recorders.clone(),
            })
        };
        let running: Family<RunningLabels, Gauge> = Family::default();
        self.registry.lock().register(
            "running_managed_controllers",
            "Indicates where instances of a controller are currently running",
            running.clone(),
        );
        let ring_metrics =
            (!sharded.is_empty()).then(|| RingMetrics::register(&mut self.registry.lock()));
        let mut controllers = Vec::new();
        for init in self.initializers.iter() {
            if !selection.is_enabled(&init.name) {
                warn!(controller = %init.name, "controller is disabled");
                continue;
            }
            let ring = match &ring_metrics {
                Some(metrics) if sharded.contains(&init.name) => Some(
                    Ring::new(self.lease_client()?, self.ring_config(&init.name)?)?
                        .with_metrics(metrics.clone()),
                ),
                _ => None,
            };
            let ctx = InitContext {
                name: init.name.clone(),
                client: self.client.clone(),
                clients: self.clients.clone(),
                factory: factory.clone(),
                shutdown: stop.clone(),
                extra: self.extra.clone(),
                shard: ring.clone(),
                shared: shared.clone(),
            };
            info!(controller = %init.name, "starting controller");
            match (init.init)(ctx).await {
                Ok(InitOutcome::Started(run)) => controllers.push(Pending {
                    name: init.name.clone(),
                    metric_name: init.aliases.first().unwrap_or(&init.name).clone(),
                    run,
                    ring,
                }),
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
        Ok(Registered {
            factory,
            shared,
            running,
            controllers,
        })
    }

    /// Starts the shared informers (with the `informer-sync` readiness check) and waits until
    /// every cache has synced; `Ok(false)` if `stop` fired first.
    pub(super) async fn sync_caches(
        &self,
        factory: &SharedInformerFactory,
        stop: &CancellationToken,
    ) -> Result<bool, ManagerError> {
        factory.start(stop.clone());
        let f = factory.clone();
        self.ready.add_check("informer-sync", move || {
            let unsynced: Vec<String> = f
                .informers_status()
                .into_iter()
                .filter(|s| !s.synced)
                .map(|s| s.to_string())
                .collect();
            if unsynced.is_empty() {
                Ok(())
            } else {
                Err(format!("not synced: {}", unsynced.join(", ")))
            }
        });
        tokio::select! {
            r = factory.wait_for_sync(self.config.cache_sync_timeout) => r?,
            _ = stop.cancelled() => return Ok(false),
        }
        info!("caches are synced");
        Ok(true)
    }

    /// Polls every registered controller's workers until `stop`; `lost()` tells, once `stop`
    /// fired, whether leadership was lost (in-flight work is then dropped at once, not drained).
    pub(super) async fn start_workers(
        &self,
        registered: Registered,
        stop: &CancellationToken,
        lost: impl Fn() -> bool,
    ) -> Result<(), ManagerError> {
        let running = registered.running;
        // A JoinSet, not detached tasks: when in-flight work is abandoned (or this future is
        // dropped) every controller still running is stopped, so no reconcile goes on acting after
        // the manager returned and the Lease was released.
        let abandon = CancellationToken::new();
        let mut tasks = JoinSet::new();
        // Each ring keeps its membership until `stop`, then until its in-flight reconciles
        // ended, then deletes its Lease: awaited last, once the workers are gone.
        let mut rings = JoinSet::new();
        for Pending {
            name,
            metric_name,
            run,
            ring,
        } in registered.controllers
        {
            if let Some(ring) = ring {
                self.health
                    .add_check(format!("shard-ring-{name}"), ring.health_check());
                let stop = stop.clone();
                rings.spawn(async move { ring.run(stop).await });
            }
            let labels = RunningLabels {
                name: metric_name,
                manager: self.config.name.clone(),
            };
            // The health check carries the canonical name; only running_managed_controllers
            // keeps upstream's alias label.
            let scope = ControllerScope::new(&name, abandon.clone());
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
        // The workers are gone, so no reconcile is admitted any more: each ring leaves at once.
        stop.cancel();
        while rings.join_next().await.is_some() {}
        match stopped {
            Some((name, reason)) => Err(ManagerError::ControllerStopped { name, reason }),
            None => Ok(()),
        }
    }

    /// The ring of sharded controller `name`: named `<manager>-<controller>`, in the leader
    /// election's namespace with its identity and durations (upstream's defaults without it).
    fn ring_config(&self, name: &str) -> Result<RingConfig, ManagerError> {
        let assignment = self.shard_assignment()?;
        let ring = ring_name(&self.config.name, name);
        let lease = match &self.config.leader_election {
            Some(le) => le.clone(),
            None => LeaderElectionConfig::new("kube-system", &ring, default_identity()),
        };
        Ok(RingConfig {
            ring,
            lease,
            vnodes: DEFAULT_VNODES,
            assignment,
        })
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
