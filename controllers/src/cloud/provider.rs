//! The provider trait, its optional facets, and the one helper upstream keeps beside them
//! (`GetInstanceProviderID`).
//!
//! All facets are object safe (`async_trait`), so controllers hold an `Arc<dyn CloudProvider>`.
//! Kubernetes objects passed in are read-only for the provider.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service};
use tokio_util::sync::CancellationToken;

use super::{CloudError, InstanceMetadata, Route, Zone};

/// What a provider gets once, after leadership is won and before any controller starts
/// (upstream `Initialize(clientBuilder, stop)`).
#[derive(Clone)]
pub struct InitializeContext {
    /// Builds the provider's own controllers' clients by client name, each with its own limiter
    /// and identity (a ServiceAccount with `--use-service-account-credentials`), as upstream.
    pub clients: controller_manager::client::ClientBuilder,
    /// Cancelled when the manager stops; background tasks the provider starts must end then.
    pub shutdown: CancellationToken,
}

/// A cloud, as the cloud controllers see it (upstream `cloudprovider.Interface`).
#[async_trait]
pub trait CloudProvider: Send + Sync + 'static {
    /// Called once before controllers start; may start background work bound to `ctx.shutdown`.
    async fn initialize(&self, ctx: InitializeContext) -> Result<(), CloudError> {
        let _ = ctx;
        Ok(())
    }
    /// The load-balancer facet; without it the service controller does not start.
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        None
    }
    /// The legacy instances facet; node controllers need this or [`Self::instances_v2`].
    fn instances(&self) -> Option<&dyn Instances> {
        None
    }
    /// The preferred instances facet; when present, `instances` and `zones` are never called by
    /// the node controllers.
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        None
    }
    /// Deprecated zones facet, consulted only on the legacy instances path.
    fn zones(&self) -> Option<&dyn Zones> {
        None
    }
    /// Clusters facet; no built-in controller uses it.
    fn clusters(&self) -> Option<&dyn Clusters> {
        None
    }
    /// The routes facet; without it the route controller does not start.
    fn routes(&self) -> Option<&dyn Routes> {
        None
    }
    /// Used to build `<name>://<instance-id>` provider IDs on the legacy path, and in logs.
    fn provider_name(&self) -> &str;
    /// Whether the cloud's resources are tagged with a cluster ID (see `--allow-untagged-cloud`).
    fn has_cluster_id(&self) -> bool;
}

/// Load balancers for Services of type LoadBalancer (upstream `cloudprovider.LoadBalancer`).
#[async_trait]
pub trait LoadBalancer: Send + Sync {
    /// The status of the load balancer made for `svc`, or `None` when there is none.
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        svc: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError>;
    /// The provider's name for the load balancer of `svc`.
    fn get_load_balancer_name(&self, cluster_name: &str, svc: &Service) -> String;
    /// Creates or updates the load balancer so it serves `svc` on `nodes`.
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        svc: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerStatus, CloudError>;
    /// Changes only the backend host set.
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        svc: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError>;
    /// Deletes the load balancer if it exists; succeeds when it is already gone.
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        svc: &Service,
    ) -> Result<(), CloudError>;
}

/// The legacy, name-based instances API (upstream `cloudprovider.Instances`).
#[async_trait]
pub trait Instances: Send + Sync {
    /// Addresses of the instance called `node_name`.
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>, CloudError>;
    /// Addresses of the instance with `provider_id`.
    async fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<Vec<NodeAddress>, CloudError>;
    /// The cloud's ID of the instance; [`CloudError::InstanceNotFound`] when it does not exist.
    async fn instance_id(&self, node_name: &str) -> Result<String, CloudError>;
    /// Instance type of the instance called `node_name`.
    async fn instance_type(&self, node_name: &str) -> Result<String, CloudError>;
    /// Instance type of the instance with `provider_id`.
    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String, CloudError>;
    /// Whether the instance exists; a stopped instance still exists.
    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool, CloudError>;
    /// Whether the instance is shut down.
    async fn instance_shutdown_by_provider_id(&self, provider_id: &str)
    -> Result<bool, CloudError>;
}

/// The node-object-based instances API (upstream `cloudprovider.InstancesV2`).
#[async_trait]
pub trait InstancesV2: Send + Sync {
    /// Whether the instance behind `node` exists; `false` makes the lifecycle controller delete it.
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError>;
    /// Whether the instance behind `node` is shut down.
    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError>;
    /// Metadata used to initialize `node`; `None` leaves the node uninitialized for now.
    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError>;
}

/// Deprecated zone lookups (upstream `cloudprovider.Zones`).
#[async_trait]
pub trait Zones: Send + Sync {
    /// Zone of the instance with `provider_id`.
    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone, CloudError>;
    /// Zone of the instance called `node_name`.
    async fn get_zone_by_node_name(&self, node_name: &str) -> Result<Zone, CloudError>;
}

/// Cluster inventory (upstream `cloudprovider.Clusters`).
#[async_trait]
pub trait Clusters: Send + Sync {
    /// Names of the clusters the cloud knows.
    async fn list_clusters(&self) -> Result<Vec<String>, CloudError>;
    /// Address of the control plane of `cluster_name`.
    async fn master(&self, cluster_name: &str) -> Result<String, CloudError>;
}

/// Pod-network routes (upstream `cloudprovider.Routes`).
#[async_trait]
pub trait Routes: Send + Sync {
    /// Every route managed for `cluster_name`.
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError>;
    /// Creates `route`; `name_hint` is the target Node's UID.
    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError>;
    /// Deletes a route previously returned by [`Self::list_routes`].
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError>;
}

/// `<provider-name>://<instance-id>` for a legacy provider (upstream `GetInstanceProviderID`);
/// [`CloudError::InstanceNotFound`] and [`CloudError::NotImplemented`] pass through unchanged so
/// callers can branch on them.
pub async fn instance_provider_id(
    cloud: &dyn CloudProvider,
    instances: &dyn Instances,
    node_name: &str,
) -> Result<String, CloudError> {
    let id = instances.instance_id(node_name).await?;
    Ok(format!("{}://{}", cloud.provider_name(), id))
}
