//! A provider wrapper that traces and measures every cloud call, so controllers stay free of
//! observability code and every provider gets it without writing any.
//!
//! [`InstrumentedCloud`] wraps any `Arc<dyn CloudProvider>` and offers exactly the facets the
//! inner provider offers. Each call runs in an INFO span named after the upstream Go method
//! (`EnsureLoadBalancer`, `InstanceMetadata`, ...) with `otel.kind=client`, `cloud.provider`,
//! `cloud.method` and, when done, `cloud.outcome` (plus `error.message` and
//! `otel.status_code=ERROR` for real failures). The span is a child of the current span, so in
//! a reconcile it hangs under the reconcile root. With [`CloudMetrics`] each call also counts in
//! `cloud_provider_requests_total{provider,method,outcome}` and
//! `cloud_provider_request_duration_seconds{provider,method}`.
//!
//! Outcomes: `success`, `not_found` (`InstanceNotFound`), `not_implemented`,
//! `implemented_elsewhere`, `retry` (the cloud asked to be called later) and `error`. Only
//! `retry` and `error` mark the span as failed: the others are answers controllers branch on.
//!
//! Every call goes through a tower stack: the [`CloudBudget`] layer (`budget.rs`: rate limit,
//! in-flight limit, per-method pause after `Retry { after }`; off unless
//! [`InstrumentedCloud::with_budget`] is given limits), then the span and metrics layer above,
//! then the provider. Requests are [`CloudRequest`]s: the method name and the call's future.
//!
//! The wrapper asks the inner provider for the facet on every call. If a provider stops
//! offering a facet it offered before, calls through the wrapper fail with `NotImplemented`
//! (and `get_load_balancer_name`, which cannot fail, returns an empty name).

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service};
use tokio::time::Instant;
use tower::{Layer, ServiceExt};
use tracing::Instrument;
use tracing::field::Empty;

mod budget;
mod metrics;
mod pacer;

pub use budget::{
    BudgetOptions, CallProvider, CloudBudget, CloudFuture, CloudRequest, MAX_QPS, MIN_QPS,
    qps_in_range,
};
pub use metrics::{
    BUDGET_WAIT_BUCKETS, CLOUD_LATENCY_BUCKETS, CloudCallLabels, CloudLatencyLabels, CloudMetrics,
};

use super::{
    CloudError, CloudProvider, Clusters, InitializeContext, InstanceMetadata, Instances,
    InstancesV2, LoadBalancer, Route, Routes, Zone, Zones,
};

/// The tower stack every call goes through: the budget, then the span and metrics, then the
/// provider. The budget is outermost, so time spent waiting for it is not counted as the cloud's
/// latency (it has its own metric).
type Stack = budget::Budgeted<Observed<CallProvider>>;

/// Everything a facet needs to delegate and observe.
struct Shared {
    inner: Arc<dyn CloudProvider>,
    provider: String,
    metrics: Option<CloudMetrics>,
    stack: Stack,
}

impl Shared {
    fn new(
        inner: Arc<dyn CloudProvider>,
        metrics: Option<CloudMetrics>,
        budget: CloudBudget,
    ) -> Self {
        let provider = inner.provider_name().to_string();
        let observe = Observe {
            provider: provider.clone(),
            metrics: metrics.clone(),
        };
        Self {
            inner,
            stack: budget.layer(observe.layer(CallProvider)),
            provider,
            metrics,
        }
    }

    /// Sends one call of `method` through the stack.
    async fn observe<T: Send>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<T, CloudError>> + Send,
    ) -> Result<T, CloudError> {
        let request = CloudRequest {
            method,
            call: Box::pin(call),
        };
        self.stack.clone().oneshot(request).await
    }
}

/// The layer that traces and measures each call (see the module docs).
#[derive(Clone)]
struct Observe {
    provider: String,
    metrics: Option<CloudMetrics>,
}

impl<S> Layer<S> for Observe {
    type Service = Observed<S>;

    fn layer(&self, inner: S) -> Observed<S> {
        Observed {
            observe: self.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
struct Observed<S> {
    observe: Observe,
    inner: S,
}

impl<'a, S, T> tower::Service<CloudRequest<'a, T>> for Observed<S>
where
    S: tower::Service<CloudRequest<'a, T>, Response = T, Error = CloudError> + Clone + Send + 'a,
    S::Future: Send + 'a,
    T: Send + 'a,
{
    type Response = T;
    type Error = CloudError;
    type Future = CloudFuture<'a, T>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), CloudError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: CloudRequest<'a, T>) -> Self::Future {
        let observe = self.observe.clone();
        let method = req.method;
        let call = self.inner.call(req);
        Box::pin(observed(observe, method, call))
    }
}

/// Runs `call` in its span and records its outcome and latency.
async fn observed<F, T>(observe: Observe, method: &'static str, call: F) -> Result<T, CloudError>
where
    F: Future<Output = Result<T, CloudError>>,
{
    let span = tracing::info_span!(
        "cloud",
        otel.name = method,
        otel.kind = "client",
        otel.status_code = Empty,
        cloud.provider = %observe.provider,
        cloud.method = method,
        cloud.outcome = Empty,
        error.message = Empty,
    );
    let started = Instant::now();
    let result = call.instrument(span.clone()).await;
    let outcome = outcome(&result);
    span.record("cloud.outcome", outcome);
    if let Err(e) = &result
        && matches!(outcome, "retry" | "error")
    {
        span.record("otel.status_code", "ERROR");
        span.record("error.message", tracing::field::display(e));
    }
    if let Some(metrics) = &observe.metrics {
        metrics.record(&observe.provider, method, outcome, started.elapsed());
    }
    result
}

fn outcome<T>(result: &Result<T, CloudError>) -> &'static str {
    match result {
        Ok(_) => "success",
        Err(CloudError::InstanceNotFound) => "not_found",
        Err(CloudError::NotImplemented) => "not_implemented",
        Err(CloudError::ImplementedElsewhere) => "implemented_elsewhere",
        Err(CloudError::Retry { .. }) => "retry",
        Err(CloudError::Other(_)) => "error",
    }
}

/// Any provider, with a span and metrics around every call (see the module docs).
pub struct InstrumentedCloud {
    facets: Facets,
}

/// One value implements every facet trait by delegating to the same facet of the inner provider.
struct Facets(Shared);

impl InstrumentedCloud {
    /// Wraps `inner`; pass `metrics` to count calls, or `None` for spans only. No budget.
    pub fn new(inner: Arc<dyn CloudProvider>, metrics: Option<CloudMetrics>) -> Self {
        Self {
            facets: Facets(Shared::new(inner, metrics, CloudBudget::unlimited())),
        }
    }

    /// Makes every call spend one process-wide budget (see [`CloudBudget`]); its waiting is
    /// measured in the metrics given to [`Self::new`].
    pub fn with_budget(self, options: &BudgetOptions) -> Self {
        let Shared {
            inner,
            provider,
            metrics,
            ..
        } = self.facets.0;
        let budget = CloudBudget::new(options, metrics.clone().map(|m| (m, provider)));
        Self {
            facets: Facets(Shared::new(inner, metrics, budget)),
        }
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &Arc<dyn CloudProvider> {
        &self.facets.0.inner
    }
}

#[async_trait]
impl CloudProvider for InstrumentedCloud {
    async fn initialize(&self, ctx: InitializeContext) -> Result<(), CloudError> {
        let shared = &self.facets.0;
        shared
            .observe("Initialize", shared.inner.initialize(ctx))
            .await
    }
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        self.inner().load_balancer().map(|_| &self.facets as _)
    }
    fn instances(&self) -> Option<&dyn Instances> {
        self.inner().instances().map(|_| &self.facets as _)
    }
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        self.inner().instances_v2().map(|_| &self.facets as _)
    }
    fn zones(&self) -> Option<&dyn Zones> {
        self.inner().zones().map(|_| &self.facets as _)
    }
    fn clusters(&self) -> Option<&dyn Clusters> {
        self.inner().clusters().map(|_| &self.facets as _)
    }
    fn routes(&self) -> Option<&dyn Routes> {
        self.inner().routes().map(|_| &self.facets as _)
    }
    fn provider_name(&self) -> &str {
        &self.facets.0.provider
    }
    fn has_cluster_id(&self) -> bool {
        self.inner().has_cluster_id()
    }
}

impl Facets {
    fn lb(&self) -> Result<&dyn LoadBalancer, CloudError> {
        self.0
            .inner
            .load_balancer()
            .ok_or(CloudError::NotImplemented)
    }
    fn instances(&self) -> Result<&dyn Instances, CloudError> {
        self.0.inner.instances().ok_or(CloudError::NotImplemented)
    }
    fn instances_v2(&self) -> Result<&dyn InstancesV2, CloudError> {
        self.0
            .inner
            .instances_v2()
            .ok_or(CloudError::NotImplemented)
    }
    fn zones(&self) -> Result<&dyn Zones, CloudError> {
        self.0.inner.zones().ok_or(CloudError::NotImplemented)
    }
    fn clusters(&self) -> Result<&dyn Clusters, CloudError> {
        self.0.inner.clusters().ok_or(CloudError::NotImplemented)
    }
    fn routes(&self) -> Result<&dyn Routes, CloudError> {
        self.0.inner.routes().ok_or(CloudError::NotImplemented)
    }
}

/// Implements facet trait `$facet` for [`Facets`]: each listed method sends one call, under its
/// upstream Go name, through the stack, delegating to the same method of the inner provider's
/// facet (found by `$get`, `NotImplemented` when the provider stopped offering it). Methods that
/// cannot fail, and so are not cloud calls to observe, follow after `;` as written.
macro_rules! observed_facet {
    (
        $facet:ident via $get:ident {
            $( $go_name:literal => fn $method:ident($($arg:ident: $ty:ty),*) -> $ret:ty; )*
        }
        $($plain:tt)*
    ) => {
        #[async_trait]
        impl $facet for Facets {
            $(
                async fn $method(&self, $($arg: $ty),*) -> Result<$ret, CloudError> {
                    self.0
                        .observe($go_name, async { self.$get()?.$method($($arg),*).await })
                        .await
                }
            )*
            $($plain)*
        }
    };
}

observed_facet! {
    LoadBalancer via lb {
        "GetLoadBalancer" => fn get_load_balancer(cluster_name: &str, svc: &Service)
            -> Option<LoadBalancerStatus>;
        "EnsureLoadBalancer" => fn ensure_load_balancer(
            cluster_name: &str,
            svc: &Service,
            nodes: &[Arc<Node>]
        ) -> LoadBalancerStatus;
        "UpdateLoadBalancer" => fn update_load_balancer(
            cluster_name: &str,
            svc: &Service,
            nodes: &[Arc<Node>]
        ) -> ();
        "EnsureLoadBalancerDeleted" => fn ensure_load_balancer_deleted(
            cluster_name: &str,
            svc: &Service
        ) -> ();
    }
    fn get_load_balancer_name(&self, cluster_name: &str, svc: &Service) -> String {
        self.lb()
            .map(|lb| lb.get_load_balancer_name(cluster_name, svc))
            .unwrap_or_default()
    }
}

observed_facet! {
    Instances via instances {
        "NodeAddresses" => fn node_addresses(node_name: &str) -> Vec<NodeAddress>;
        "NodeAddressesByProviderID" => fn node_addresses_by_provider_id(provider_id: &str)
            -> Vec<NodeAddress>;
        "InstanceID" => fn instance_id(node_name: &str) -> String;
        "InstanceType" => fn instance_type(node_name: &str) -> String;
        "InstanceTypeByProviderID" => fn instance_type_by_provider_id(provider_id: &str) -> String;
        "InstanceExistsByProviderID" => fn instance_exists_by_provider_id(provider_id: &str)
            -> bool;
        "InstanceShutdownByProviderID" => fn instance_shutdown_by_provider_id(provider_id: &str)
            -> bool;
    }
}

observed_facet! {
    InstancesV2 via instances_v2 {
        "InstanceExists" => fn instance_exists(node: &Node) -> bool;
        "InstanceShutdown" => fn instance_shutdown(node: &Node) -> bool;
        "InstanceMetadata" => fn instance_metadata(node: &Node) -> Option<InstanceMetadata>;
    }
}

observed_facet! {
    Zones via zones {
        "GetZoneByProviderID" => fn get_zone_by_provider_id(provider_id: &str) -> Zone;
        "GetZoneByNodeName" => fn get_zone_by_node_name(node_name: &str) -> Zone;
    }
}

observed_facet! {
    Clusters via clusters {
        "ListClusters" => fn list_clusters() -> Vec<String>;
        "Master" => fn master(cluster_name: &str) -> String;
    }
}

observed_facet! {
    Routes via routes {
        "ListRoutes" => fn list_routes(cluster_name: &str) -> Vec<Route>;
        "CreateRoute" => fn create_route(cluster_name: &str, name_hint: &str, route: &Route) -> ();
        "DeleteRoute" => fn delete_route(cluster_name: &str, route: &Route) -> ();
    }
}
