//! The fake cloud: an in-memory [`CloudProvider`] for tests, `--dev`, and as the first example a
//! provider author reads.
//!
//! It owns a small world (instances, load balancers, routes, clusters), every facet of the
//! provider contract, a call log and fault injection. Each facet lives in its own file, the way a
//! real provider would lay it out:
//!
//! | file | owns |
//! |---|---|
//! | `config.rs` | the `--cloud-config` YAML format and its validation |
//! | `instances.rs` | `InstancesV2`, legacy `Instances` and `Zones` |
//! | `load_balancers.rs` | `LoadBalancer` and the IP pool |
//! | `routes.rs` | `Routes` and `Clusters` |
//! | `faults.rs` | the call log and fault injection |
//!
//! [`FakeCloud`] is a cheap `Clone` handle: a test keeps one to change the world and read the
//! call log while controllers hold the same cloud as `Arc<dyn CloudProvider>`.
//!
//! ```
//! use cloud_controllers::cloud::fake::{FakeCloud, FakeInstance, InstanceState};
//!
//! let cloud = FakeCloud::builder()
//!     .instance(FakeInstance::new("node-1").zone("zone-a", "region-1").internal_ip("10.0.0.1"))
//!     .lb_pool_cidr("192.0.2.0/29")
//!     .build()
//!     .expect("valid fake cloud");
//! cloud.set_instance_state("node-1", InstanceState::Shutdown).expect("node-1 exists");
//! ```

mod config;
mod faults;
mod instances;
mod load_balancers;
mod routes;
mod world;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::NodeAddress;
use parking_lot::Mutex;

use super::{
    CloudError, CloudProvider, Clusters, InitializeContext, Instances, InstancesV2, LoadBalancer,
    Route, Routes, Zones,
};

pub use config::ConfigError;
pub use faults::{CallOutcome, CloudCall, FaultError, FaultSpec, Method};
pub use load_balancers::FakeLoadBalancer;
pub use world::{Facets, FakeInstance, InstanceState, UnknownInstance};

use faults::Faults;
use load_balancers::IpPool;
use world::World;

/// The provider name the fake registers under and uses in provider IDs (`fake://node-1`).
pub const PROVIDER_NAME: &str = "fake";

/// An in-memory cloud; see the [module docs](self).
#[derive(Clone)]
pub struct FakeCloud {
    shared: Arc<Shared>,
    caller: Arc<Mutex<Option<String>>>,
}

struct Shared {
    provider_name: String,
    has_cluster_id: bool,
    facets: Facets,
    world: Mutex<World>,
    faults: Faults,
}

impl Default for FakeCloud {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeCloud {
    /// An empty cloud with every facet and the default IP pool, for tests that add state later.
    pub fn new() -> Self {
        Self::from_parts(
            PROVIDER_NAME.to_owned(),
            true,
            Facets::all(),
            World::new(IpPool::default_pool()),
        )
    }

    /// Starts describing a cloud in code; [`FakeCloudBuilder::build`] validates it.
    pub fn builder() -> FakeCloudBuilder {
        FakeCloudBuilder::default()
    }

    /// Builds the cloud a `--cloud-config` file describes (format in `config.rs`).
    pub fn from_config(yaml: &[u8]) -> Result<FakeCloud, ConfigError> {
        config::parse(yaml)?.build()
    }

    fn from_parts(
        provider_name: String,
        has_cluster_id: bool,
        facets: Facets,
        world: World,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                provider_name,
                has_cluster_id,
                facets,
                world: Mutex::new(world),
                faults: Faults::default(),
            }),
            caller: Arc::new(Mutex::new(None)),
        }
    }

    /// Which facets this cloud offers.
    pub fn facets(&self) -> Facets {
        self.shared.facets
    }

    // ---- caller tags and the call log ----

    /// Tags every later call made through this handle (and its clones) with `identity`, so
    /// leader-failover tests can tell which replica called the cloud.
    pub fn set_caller(&self, identity: impl Into<String>) {
        *self.caller.lock() = Some(identity.into());
    }

    /// A new handle on the same cloud with its own caller tag; give one to each replica.
    pub fn with_caller(&self, identity: impl Into<String>) -> FakeCloud {
        FakeCloud {
            shared: Arc::clone(&self.shared),
            caller: Arc::new(Mutex::new(Some(identity.into()))),
        }
    }

    /// Every call made so far, oldest first, from all handles.
    pub fn calls(&self) -> Vec<CloudCall> {
        self.shared.faults.calls()
    }

    /// The calls to one method, oldest first.
    pub fn calls_to(&self, method: Method) -> Vec<CloudCall> {
        let mut calls = self.calls();
        calls.retain(|c| c.method == method);
        calls
    }

    /// Forgets the calls so far, so a test can assert on what happens next only.
    pub fn clear_calls(&self) {
        self.shared.faults.clear_calls();
    }

    // ---- fault injection ----

    /// Makes `method` fail as `spec` says; faults for one method fire in the order added.
    pub fn fail(&self, method: Method, spec: FaultSpec) {
        self.shared.faults.add_fault(method, spec);
    }

    /// Removes every injected fault of `method`.
    pub fn clear_faults_for(&self, method: Method) {
        self.shared.faults.clear_faults(Some(method));
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        self.shared.faults.clear_faults(None);
    }

    /// Delays every call of `method` by `latency` (`Duration::ZERO` removes the delay).
    pub fn set_latency(&self, method: Method, latency: Duration) {
        self.shared.faults.set_latency(method, latency);
    }

    // ---- instances ----

    /// Adds an instance, replacing one of the same name; an empty provider ID becomes
    /// `<provider>://<name>`.
    pub fn add_instance(&self, instance: FakeInstance) {
        let instance = instance.with_default_provider_id(&self.shared.provider_name);
        self.shared.world.lock().upsert_instance(instance);
    }

    /// Removes an instance entirely (the same as [`InstanceState::Gone`] for the controllers).
    pub fn remove_instance(&self, name: &str) -> Option<FakeInstance> {
        self.shared.world.lock().remove_instance(name)
    }

    /// Changes an instance in place, e.g. its type or labels.
    pub fn update_instance(
        &self,
        name: &str,
        change: impl FnOnce(&mut FakeInstance),
    ) -> Result<(), UnknownInstance> {
        let mut world = self.shared.world.lock();
        let instance = world
            .instance_mut(name)
            .ok_or_else(|| UnknownInstance(name.to_owned()))?;
        change(instance);
        Ok(())
    }

    /// Starts, stops or deletes an instance.
    pub fn set_instance_state(
        &self,
        name: &str,
        state: InstanceState,
    ) -> Result<(), UnknownInstance> {
        self.update_instance(name, |i| i.state = state)
    }

    /// Replaces an instance's addresses, to test the node controller's address refresh.
    pub fn set_instance_addresses(
        &self,
        name: &str,
        addresses: Vec<NodeAddress>,
    ) -> Result<(), UnknownInstance> {
        self.update_instance(name, |i| i.addresses = addresses)
    }

    /// One instance, by name.
    pub fn instance(&self, name: &str) -> Option<FakeInstance> {
        self.shared.world.lock().instance_by_name(name).cloned()
    }

    /// All instances, in the order they were added.
    pub fn instances(&self) -> Vec<FakeInstance> {
        self.shared.world.lock().instances().to_vec()
    }

    // ---- load balancers, routes, clusters ----

    /// All load balancers, ordered by name.
    pub fn load_balancers(&self) -> Vec<FakeLoadBalancer> {
        self.shared.world.lock().load_balancers()
    }

    /// The load balancer of the Service `namespace/name`, if there is one.
    pub fn lb_for(&self, service: &str) -> Option<FakeLoadBalancer> {
        self.shared
            .world
            .lock()
            .load_balancers()
            .into_iter()
            .find(|lb| lb.service == service)
    }

    /// The routes of `cluster_name`, ordered by destination CIDR.
    pub fn routes(&self, cluster_name: &str) -> Vec<Route> {
        self.shared.world.lock().routes(cluster_name)
    }

    /// Puts a route into the cloud directly (e.g. a stale one the controller should delete);
    /// replaces a route with the same destination CIDR.
    pub fn add_route(&self, cluster_name: &str, route: Route) {
        self.shared.world.lock().put_route(cluster_name, route);
    }

    /// Marks the route to `destination_cidr` as blackholed (or not); false when no such route.
    #[must_use]
    pub fn set_route_blackhole(
        &self,
        cluster_name: &str,
        destination_cidr: &str,
        blackhole: bool,
    ) -> bool {
        self.shared
            .world
            .lock()
            .set_route_blackhole(cluster_name, destination_cidr, blackhole)
    }

    /// Adds a cluster for the `Clusters` facet.
    pub fn add_cluster(&self, name: impl Into<String>, master: impl Into<String>) {
        self.shared
            .world
            .lock()
            .add_cluster(name.into(), master.into());
    }

    /// Runs one provider call: applies latency and faults, then `op` on the world, and logs it.
    async fn call<T>(
        &self,
        method: Method,
        key: impl Into<String>,
        op: impl FnOnce(&mut World) -> Result<T, CloudError>,
    ) -> Result<T, CloudError> {
        let key = key.into();
        let caller = self.caller.lock().clone();
        if let Some(latency) = self.shared.faults.latency(method) {
            tokio::time::sleep(latency).await;
        }
        let result = match self.shared.faults.take_fault(method, &key) {
            Some(err) => Err(err),
            None => op(&mut self.shared.world.lock()),
        };
        self.shared.faults.record(CloudCall {
            method,
            key,
            caller,
            outcome: match &result {
                Ok(_) => CallOutcome::Ok,
                Err(err) => CallOutcome::Err(err.to_string()),
            },
        });
        result
    }

    /// Logs a call that cannot fail or wait (the synchronous `GetLoadBalancerName`).
    fn record_infallible(&self, method: Method, key: String) {
        let caller = self.caller.lock().clone();
        self.shared.faults.record(CloudCall {
            method,
            key,
            caller,
            outcome: CallOutcome::Ok,
        });
    }
}

impl std::fmt::Debug for FakeCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeCloud")
            .field("provider_name", &self.shared.provider_name)
            .field("facets", &self.shared.facets)
            .field("caller", &*self.caller.lock())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl CloudProvider for FakeCloud {
    async fn initialize(&self, _ctx: InitializeContext) -> Result<(), CloudError> {
        self.call(Method::Initialize, "", |_| Ok(())).await
    }
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        self.shared
            .facets
            .load_balancer
            .then_some(self as &dyn LoadBalancer)
    }
    fn instances(&self) -> Option<&dyn Instances> {
        self.shared
            .facets
            .instances
            .then_some(self as &dyn Instances)
    }
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        self.shared
            .facets
            .instances_v2
            .then_some(self as &dyn InstancesV2)
    }
    fn zones(&self) -> Option<&dyn Zones> {
        self.shared.facets.zones.then_some(self as &dyn Zones)
    }
    fn clusters(&self) -> Option<&dyn Clusters> {
        self.shared.facets.clusters.then_some(self as &dyn Clusters)
    }
    fn routes(&self) -> Option<&dyn Routes> {
        self.shared.facets.routes.then_some(self as &dyn Routes)
    }
    fn provider_name(&self) -> &str {
        &self.shared.provider_name
    }
    fn has_cluster_id(&self) -> bool {
        self.shared.has_cluster_id
    }
}

/// Describes a fake cloud in code; the same rules as the config file apply at [`Self::build`].
#[derive(Clone, Debug)]
pub struct FakeCloudBuilder {
    provider_name: String,
    has_cluster_id: bool,
    facets: Facets,
    instances: Vec<FakeInstance>,
    pool_cidrs: Vec<String>,
    pool_addresses: Vec<String>,
    clusters: BTreeMap<String, String>,
}

impl Default for FakeCloudBuilder {
    fn default() -> Self {
        Self {
            provider_name: PROVIDER_NAME.to_owned(),
            has_cluster_id: true,
            facets: Facets::all(),
            instances: Vec::new(),
            pool_cidrs: Vec::new(),
            pool_addresses: Vec::new(),
            clusters: BTreeMap::new(),
        }
    }
}

impl FakeCloudBuilder {
    /// Name used in provider IDs and logs (default `fake`).
    pub fn provider_name(mut self, name: impl Into<String>) -> Self {
        self.provider_name = name.into();
        self
    }

    /// What [`CloudProvider::has_cluster_id`] answers (default true), to test
    /// `--allow-untagged-cloud`.
    pub fn has_cluster_id(mut self, has: bool) -> Self {
        self.has_cluster_id = has;
        self
    }

    /// Which facets exist (default: all), to test that controllers report "not started".
    pub fn facets(mut self, facets: Facets) -> Self {
        self.facets = facets;
        self
    }

    /// Adds an instance; names and provider IDs must be unique.
    pub fn instance(mut self, instance: FakeInstance) -> Self {
        self.instances.push(instance);
        self
    }

    /// Adds the host addresses of `cidr` to the load-balancer IP pool.
    pub fn lb_pool_cidr(mut self, cidr: impl Into<String>) -> Self {
        self.pool_cidrs.push(cidr.into());
        self
    }

    /// Adds single addresses to the load-balancer IP pool.
    pub fn lb_pool_addresses<I, S>(mut self, addresses: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.pool_addresses
            .extend(addresses.into_iter().map(Into::into));
        self
    }

    /// Adds a cluster for the `Clusters` facet.
    pub fn cluster(mut self, name: impl Into<String>, master: impl Into<String>) -> Self {
        self.clusters.insert(name.into(), master.into());
        self
    }

    /// Validates the description and makes the cloud. Without any pool entry the pool is
    /// `192.0.2.0/24` (TEST-NET-1).
    pub fn build(self) -> Result<FakeCloud, ConfigError> {
        if self.provider_name.trim().is_empty() {
            return Err(ConfigError::EmptyProviderName);
        }
        let pool = if self.pool_cidrs.is_empty() && self.pool_addresses.is_empty() {
            IpPool::default_pool()
        } else {
            IpPool::parse(&self.pool_cidrs, &self.pool_addresses)?
        };
        let mut world = World::new(pool);
        for instance in self.instances {
            let instance = instance.with_default_provider_id(&self.provider_name);
            world::validate_instance(&instance)?;
            if world.instance_by_name(&instance.name).is_some() {
                return Err(ConfigError::DuplicateInstanceName {
                    name: instance.name,
                    at: config::At::default(),
                });
            }
            if world
                .instance_by_provider_id(&instance.provider_id)
                .is_some()
            {
                return Err(ConfigError::DuplicateProviderId {
                    provider_id: instance.provider_id,
                    at: config::At::default(),
                });
            }
            world.upsert_instance(instance);
        }
        for (name, master) in self.clusters {
            world.add_cluster(name, master);
        }
        Ok(FakeCloud::from_parts(
            self.provider_name,
            self.has_cluster_id,
            self.facets,
            world,
        ))
    }
}
