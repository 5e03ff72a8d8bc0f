//! The three phases of running controllers, kept apart so they can run at different moments:
//! [`Manager::register`] (every selected initializer registers its informers and handlers and
//! hands back its workers' future, unpolled), [`Manager::sync_caches`] (start the shared informers
//! and wait for them) and [`Manager::start_workers`] (poll the workers until shutdown, a dead
//! controller or lost leadership, then drain or abandon them).
//!
//! A cold manager runs all three after winning the Lease; a warm standby runs the first two while
//! waiting for it (see `run.rs`). A controller that must run on every replica (e.g. a sharded
//! one) would have its workers started from [`Registered`] without waiting for the Lease.

use std::time::Duration;

use futures::future::BoxFuture;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::context::{InitContext, Shared};
use super::initializers::InitOutcome;
use super::run::{Manager, ManagerError, RunningLabels};
use super::selection::ControllerSelection;
use crate::controller::ControllerScope;
use crate::controller::layers::ControllerMetrics;
use crate::informer::SharedInformerFactory;
use crate::panic_guard::guard;
use crate::workqueue::{TokenBucket, WorkQueueMetrics};

/// One controller whose initializer registered it; its workers have not been polled yet.
pub(super) struct Pending {
    name: String,
    metric_name: String,
    run: BoxFuture<'static, ()>,
}

/// What the registration phase produced: the shared cache (not started) and each controller's
/// workers.
pub(super) struct Registered {
    pub(super) factory: SharedInformerFactory,
    shared: std::sync::Arc<Shared>,
    controllers: Vec<Pending>,
}

impl<C: Send + Sync + 'static> Manager<C> {
    /// Runs every selected initializer against one new informer factory. `stop` is the token the
    /// controllers see as their shutdown: their workers and loops end when it fires.
    pub(super) async fn register(
        &self,
        selection: &ControllerSelection,
        stop: &CancellationToken,
    ) -> Result<Registered, ManagerError> {
        let informer_client = self
            .clients
            .root_client("shared-informers")
            .map_err(ManagerError::Client)?;
        let factory = SharedInformerFactory::new(informer_client)
            .with_default_resync(self.config.min_resync_period.map(jittered));
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
        let mut controllers = Vec::new();
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
                Ok(InitOutcome::Started(run)) => controllers.push(Pending {
                    name: init.name.clone(),
                    metric_name: init.aliases.first().unwrap_or(&init.name).clone(),
                    run,
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
                .map(|s| s.kind)
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
        let running: Family<RunningLabels, Gauge> = Family::default();
        self.registry.lock().register(
            "running_managed_controllers",
            "Indicates where instances of a controller are currently running",
            running.clone(),
        );
        let shared = registered.shared;
        // A JoinSet, not detached tasks: when in-flight work is abandoned (or this future is
        // dropped) every controller still running is stopped, so no reconcile goes on acting after
        // the manager returned and the Lease was released.
        let abandon = CancellationToken::new();
        let mut tasks = JoinSet::new();
        for Pending {
            name,
            metric_name,
            run,
        } in registered.controllers
        {
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
