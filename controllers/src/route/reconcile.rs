//! One route reconcile pass against the cloud (upstream `reconcileNodeRoutes`), and the periodic
//! loop that runs it every `--route-reconciliation-period`.

use std::sync::Arc;
use std::time::Duration;

use controller_manager::controller::layers::ControllerMetrics;
use controller_manager::controller::{Period, Periodic};
use futures::StreamExt;
use futures::future::join_all;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::cidrs::Cidr;
use super::condition::update_networking_condition;
use super::metrics::RouteMetrics;
use super::plan::{RouteCreation, plan};
use crate::cloud::{CloudError, CloudProvider, Route, Routes};
use crate::event_sink::{EventSink, EventType};
use crate::listers::NodeLister;
use crate::names::node_route::CONTROLLER_NAME;
use crate::wiring::RetryHint;

/// At most this many cloud route calls (creates and deletes) are in flight at once; upstream's
/// answer to the 1000-node route-creation storms (kubernetes/kubernetes #26119).
pub const MAX_CONCURRENT_ROUTE_OPERATIONS: usize = 200;

/// At most this many NetworkUnavailable writes are in flight at once. Upstream starts one
/// goroutine per node and relies on client-go's QPS limit alone; the client here has that limit
/// too (`--kube-api-qps`/`--kube-api-burst`), and this bound also keeps the first pass on a large
/// cluster from holding thousands of requests queued behind it.
pub const MAX_CONCURRENT_CONDITION_UPDATES: usize = 50;

/// The shortest period [`RouteController::run`] accepts.
pub const MIN_RECONCILIATION_PERIOD: Duration = Duration::from_secs(1);

/// Why the route controller cannot be built or a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// Upstream skips the controller with a warning; the caller reports "not started".
    #[error(
        "the cloud provider does not support routes; the route controller needs the Routes facet"
    )]
    RoutesUnsupported,
    /// No cluster CIDR was configured, so no route could be recognised as ours.
    #[error("no cluster CIDR configured: set --cluster-cidr")]
    NoClusterCidrs,
    /// `ListRoutes` failed; the only failure that fails a pass.
    #[error("error listing routes: {0}")]
    ListRoutes(#[source] CloudError),
}

/// A cloud `Retry { after }` from `ListRoutes` (the only call that fails a pass) asks the
/// watch-based mode to run the next pass after exactly that delay.
impl RetryHint for RouteError {
    fn retry_after(&self) -> Option<Duration> {
        match self {
            RouteError::ListRoutes(err) => err.retry_after(),
            RouteError::RoutesUnsupported | RouteError::NoClusterCidrs => None,
        }
    }
}

/// The node-route controller: makes the cloud's routes match the Nodes' pod CIDRs and reports
/// the outcome in each Node's NetworkUnavailable condition.
pub struct RouteController {
    cloud: Arc<dyn CloudProvider>,
    api: kube::Client,
    nodes: Arc<dyn NodeLister>,
    events: Arc<dyn EventSink>,
    cluster_name: String,
    cluster_cidrs: Vec<Cidr>,
    metrics: RouteMetrics,
}

fn node_ref(node: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(node.into()),
        uid: Some(uid.into()),
        ..Default::default()
    }
}

impl RouteController {
    /// Builds the controller; `cluster_cidrs` come from
    /// [`parse_cluster_cidrs`](super::cidrs::parse_cluster_cidrs).
    pub fn new(
        cloud: Arc<dyn CloudProvider>,
        api: kube::Client,
        cluster_name: impl Into<String>,
        cluster_cidrs: Vec<Cidr>,
        nodes: Arc<dyn NodeLister>,
        events: Arc<dyn EventSink>,
    ) -> Result<Self, RouteError> {
        if cloud.routes().is_none() {
            return Err(RouteError::RoutesUnsupported);
        }
        if cluster_cidrs.is_empty() {
            return Err(RouteError::NoClusterCidrs);
        }
        Ok(Self {
            cloud,
            api,
            nodes,
            events,
            cluster_name: cluster_name.into(),
            cluster_cidrs,
            metrics: RouteMetrics::default(),
        })
    }

    /// Uses `metrics` (registered with [`RouteMetrics::new`]) instead of unregistered ones.
    pub fn with_metrics(mut self, metrics: RouteMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    fn routes(&self) -> Result<&dyn Routes, RouteError> {
        self.cloud.routes().ok_or(RouteError::RoutesUnsupported)
    }

    /// Runs [`Self::reconcile_node_routes`] now and then every `period`, measured from the start
    /// of each pass (upstream `wait.NonSlidingUntil`), until `shutdown`, as a [`Periodic`] loop
    /// counted in `metrics`; errors are only logged (and counted). A zero period would be a hot
    /// loop against the cloud (anchors §C); it is raised to [`MIN_RECONCILIATION_PERIOD`].
    pub async fn run(
        &self,
        period: Duration,
        metrics: &ControllerMetrics,
        shutdown: CancellationToken,
    ) {
        if period < MIN_RECONCILIATION_PERIOD {
            tracing::warn!(?period, min = ?MIN_RECONCILIATION_PERIOD, "route reconciliation period too short; using the minimum");
        }
        let period = Period::NonSliding(period.max(MIN_RECONCILIATION_PERIOD));
        Periodic::new(CONTROLLER_NAME, period, metrics)
            .run(shutdown, || self.reconcile_node_routes())
            .await;
    }

    /// One pass: list routes and Nodes, delete stale owned routes, create missing ones (at most
    /// [`MAX_CONCURRENT_ROUTE_OPERATIONS`] cloud calls in flight), then write NetworkUnavailable.
    /// Individual cloud and API failures are logged (creates also as `FailedToCreateRoute`
    /// events) and retried by the next pass; only a failed `ListRoutes` fails the pass.
    #[tracing::instrument(skip_all, fields(controller = CONTROLLER_NAME))]
    pub async fn reconcile_node_routes(&self) -> Result<(), RouteError> {
        self.metrics.route_sync.inc();
        let routes_api = self.routes()?;
        let routes = routes_api
            .list_routes(&self.cluster_name)
            .await
            .map_err(RouteError::ListRoutes)?;
        let nodes = self.nodes.list();
        let mut plan = plan(&nodes, &routes, &self.cluster_cidrs);
        let limiter = Semaphore::new(MAX_CONCURRENT_ROUTE_OPERATIONS);

        let deletions = join_all(
            plan.deletions
                .iter()
                .map(|r| self.delete_route(routes_api, &limiter, r)),
        );
        let creations = join_all(
            plan.creations
                .iter()
                .map(|c| self.create_route(routes_api, &limiter, c)),
        );
        let created: Vec<bool> = if plan.wait_for_deletions {
            deletions.await;
            creations.await
        } else {
            futures::join!(deletions, creations).1
        };
        let done: Vec<(String, String)> = plan
            .creations
            .iter()
            .zip(created)
            .filter(|(_, ok)| *ok)
            .map(|(c, _)| (c.node.clone(), c.route.destination_cidr.clone()))
            .collect();
        for (node, cidr) in done {
            plan.mark_created(&node, &cidr);
        }

        let unavailable = plan.network_unavailable();
        // Collected first: a lazy iterator held across the await would make the future !Send.
        let updates: Vec<_> = nodes
            .iter()
            .filter_map(|node| {
                let name = node.metadata.name.as_deref()?;
                let unavailable = *unavailable.get(name)?;
                Some(self.update_condition(node, unavailable))
            })
            .collect();
        futures::stream::iter(updates)
            .buffer_unordered(MAX_CONCURRENT_CONDITION_UPDATES)
            .collect::<()>()
            .await;
        Ok(())
    }

    async fn delete_route(&self, routes: &dyn Routes, limiter: &Semaphore, route: &Route) {
        let Ok(_permit) = limiter.acquire().await else {
            return;
        };
        let start = Instant::now();
        match routes.delete_route(&self.cluster_name, route).await {
            Ok(()) => {
                tracing::info!(route = %route.name, cidr = %route.destination_cidr, node = %route.target_node, elapsed = ?start.elapsed(), "deleted route")
            }
            Err(err) => {
                tracing::error!(route = %route.name, cidr = %route.destination_cidr, error = %err, "could not delete route")
            }
        }
    }

    /// `true` when the route was created.
    async fn create_route(
        &self,
        routes: &dyn Routes,
        limiter: &Semaphore,
        c: &RouteCreation,
    ) -> bool {
        let Ok(_permit) = limiter.acquire().await else {
            return false;
        };
        let start = Instant::now();
        // Upstream wraps this in retry-on-conflict, which only retries Kubernetes 409s and so
        // never retries a cloud error: one attempt here, the next pass retries.
        match routes
            .create_route(&self.cluster_name, &c.name_hint, &c.route)
            .await
        {
            Ok(()) => {
                tracing::info!(node = %c.node, cidr = %c.route.destination_cidr, elapsed = ?start.elapsed(), "created route");
                true
            }
            Err(err) => {
                let msg = format!(
                    "Could not create route {} {} for node {} after {:?}: {err}",
                    c.name_hint,
                    c.route.destination_cidr,
                    c.node,
                    start.elapsed()
                );
                tracing::warn!("{msg}");
                self.events.emit(
                    &node_ref(&c.node, &c.name_hint),
                    EventType::Warning,
                    "FailedToCreateRoute",
                    &msg,
                );
                false
            }
        }
    }

    async fn update_condition(&self, node: &Node, unavailable: bool) {
        if let Err(err) = update_networking_condition(&self.api, node, unavailable).await {
            tracing::error!(node = ?node.metadata.name, error = %err, "error updating NetworkUnavailable condition");
        }
    }
}
