//! The fake cloud: an in-memory [`CloudProvider`] for tests, `--dev`, and as the first example a
//! provider author reads. It is its own crate (as upstream's `k8s.io/cloud-provider/fake`), so
//! `cloud-controllers` and a distro built on it never compile it.
//!
//! It owns a small world (instances, load balancers, routes, clusters), every facet of the
//! provider contract, a call log and fault injection. Each facet lives in its own file, the way a
//! real provider would lay it out:
//!
//! | file | owns |
//! |---|---|
//! | `builder.rs` | describing a cloud in code |
//! | `config_error.rs` | why a description was rejected, and the line it points at |
//! | `config.rs` | the `--cloud-config` YAML format and its validation |
//! | `instances.rs` | `InstancesV2`, legacy `Instances` and `Zones` |
//! | `load_balancers.rs` | `LoadBalancer` |
//! | `lb_store.rs` | load balancers as the world stores them (shared node sets) |
//! | `ip_pool.rs` | the addresses load balancers get |
//! | `routes.rs` | `Routes` and `Clusters` |
//! | `faults.rs` | the call log and fault injection |
//! | `rate_limit.rs` | the API quota that answers `Retry { after }` |
//! | `gates.rs` | holding calls mid-flight |
//! | `world.rs` | the state the facets share, and instance lookups |
//!
//! Read as a template for a real provider: each facet method finds its object (by provider ID
//! first, then by name), answers from it, and maps "not there" to the typed [`CloudError`]
//! the controllers branch on. Where a real provider would call its cloud's API, the fake reads
//! and writes its in-memory world under one lock; everything else (config parsing with line
//! numbers, the registry [`factory`]) is what a real provider needs too.
//!
//! [`FakeCloud`] is a cheap `Clone` handle: a test keeps one to change the world and read the
//! call log while controllers hold the same cloud as `Arc<dyn CloudProvider>`.
//!
//! ```
//! use fake_cloud::{FakeCloud, FakeInstance, InstanceState};
//!
//! let cloud = FakeCloud::builder()
//!     .instance(FakeInstance::new("node-1").zone("zone-a", "region-1").internal_ip("10.0.0.1"))
//!     .lb_pool_cidr("192.0.2.0/29")
//!     .build()
//!     .expect("valid fake cloud");
//! cloud.set_instance_state("node-1", InstanceState::Shutdown).expect("node-1 exists");
//! ```

mod builder;
mod config;
mod config_error;
mod faults;
mod gates;
mod instances;
mod ip_pool;
mod lb_store;
mod load_balancers;
pub mod objects;
mod rate_limit;
mod routes;
mod world;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::NodeAddress;
use parking_lot::Mutex;

use cloud_controllers::cloud::{
    CloudError, CloudProvider, Clusters, InitializeContext, Instances, InstancesV2, LoadBalancer,
    Route, Routes, Zones,
};

pub use builder::FakeCloudBuilder;
pub use config_error::{ConfigError, SourceLine};
pub use faults::{
    CallOutcome, CloudCall, DEFAULT_CALL_LOG_CAPACITY, FaultError, FaultSpec, Method,
};
pub use gates::HeldCalls;
pub use lb_store::FakeLoadBalancer;
pub use load_balancers::default_load_balancer_name;
pub use rate_limit::{RateLimit, RateLimitError};
pub use world::{DEFAULT_INSTANCE_TYPE, Facets, FakeInstance, InstanceState, UnknownInstance};

use faults::Faults;
use gates::Gates;
use ip_pool::IpPool;
use rate_limit::Quota;
use world::World;

/// The provider name the fake registers under and uses in provider IDs (`fake://node-1`).
pub const PROVIDER_NAME: &str = "fake";

/// The registry factory of the `fake` provider: the cloud `--cloud-config` describes, or an
/// empty one (no instances, no adoption) without a file. Register it as any provider is, e.g.
/// `CloudControllerManager::new(..).provider(fake_cloud::PROVIDER_NAME, fake_cloud::factory)`
/// (what the stock binary does).
pub fn factory(
    config: Option<&[u8]>,
) -> Result<Arc<dyn CloudProvider>, cloud_controllers::cloud::BoxError> {
    let cloud = match config {
        Some(bytes) => FakeCloud::from_config(bytes)?,
        None => FakeCloud::new(),
    };
    if cloud.all_instances().is_empty() && !cloud.shared.world.lock().adopt_unknown_nodes {
        tracing::warn!(
            "fake cloud provider without instances: it initializes and deletes no Node; it is a \
             test double, not a cloud (list instances in --cloud-config, or try --dev)"
        );
    }
    Ok(Arc::new(cloud))
}

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
    gates: Arc<Gates>,
    quota: Quota,
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
            World::new(PROVIDER_NAME, IpPool::default_pool()),
        )
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
                gates: Arc::default(),
                quota: Quota::default(),
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

    /// The calls made so far, oldest first, from all handles: the newest
    /// [`DEFAULT_CALL_LOG_CAPACITY`] (see [`Self::set_call_log_capacity`]); count with
    /// [`Self::call_count`], which misses none.
    pub fn calls(&self) -> Vec<CloudCall> {
        self.shared.faults.calls()
    }

    /// How many calls to `method` were made since the last [`Self::clear_calls`], including those
    /// the log has dropped: what benchmarks count.
    pub fn call_count(&self, method: Method) -> u64 {
        self.shared.faults.count(method)
    }

    /// Keeps at most `capacity` calls in the log (0 keeps counters only); the oldest are dropped.
    pub fn set_call_log_capacity(&self, capacity: usize) {
        self.shared.faults.set_call_log_capacity(capacity);
    }

    /// The calls to one method, oldest first.
    pub fn calls_to(&self, method: Method) -> Vec<CloudCall> {
        let mut calls = self.calls();
        calls.retain(|c| c.method == method);
        calls
    }

    /// Waits until at least `n` calls to `method` were made (counting from the last
    /// [`Self::clear_calls`]) and returns those the log holds; wrap it in `tokio::time::timeout`
    /// instead of polling the log with sleeps.
    pub async fn wait_for_calls(&self, method: Method, n: usize) -> Vec<CloudCall> {
        self.shared.faults.wait_for_calls(method, n).await
    }

    /// Forgets the calls so far, so a test can assert on what happens next only.
    pub fn clear_calls(&self) {
        self.shared.faults.clear_calls();
    }

    // ---- fault injection ----

    /// Makes `method` fail as `spec` says; faults for one method fire in the order added.
    /// (`GetLoadBalancerName` is synchronous and cannot fail.)
    pub fn fail(&self, method: Method, spec: FaultSpec) {
        if method == Method::GetLoadBalancerName {
            tracing::warn!("fake cloud: GetLoadBalancerName cannot fail; fault ignored");
            return;
        }
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

    /// Delays every call of `method` by `latency` (`Duration::ZERO` removes the delay);
    /// `GetLoadBalancerName` is synchronous and never waits.
    pub fn set_latency(&self, method: Method, latency: Duration) {
        self.shared.faults.set_latency(method, latency);
    }

    /// Gives the cloud an API quota, or removes it (`None`). Over the quota a call fails at once
    /// with [`CloudError::Retry`], `after` being the time until the quota lets one call through;
    /// refused calls are logged. A new quota starts full. A limit that lets nothing through
    /// (`qps <= 0` or `burst == 0`) is refused with its error.
    pub fn set_rate_limit(&self, limit: Option<RateLimit>) -> Result<(), RateLimitError> {
        if let Some(limit) = &limit {
            limit.validate()?;
        }
        self.shared.quota.set(limit);
        Ok(())
    }

    // ---- instances ----

    /// Adds an instance (a machine joining), replacing one of the same name; an empty provider
    /// ID becomes `<provider>://<name>`. The builder's rules apply: a valid name and addresses,
    /// and a provider ID no other instance has.
    pub fn add_instance(&self, instance: FakeInstance) -> Result<(), ConfigError> {
        let instance = instance.with_default_provider_id(&self.shared.provider_name);
        world::validate_instance(&instance)?;
        let mut world = self.shared.world.lock();
        if world
            .instance_by_provider_id(&instance.provider_id)
            .is_some_and(|other| other.name != instance.name)
        {
            return Err(ConfigError::DuplicateProviderId {
                provider_id: instance.provider_id,
                at: SourceLine::default(),
            });
        }
        world.upsert_instance(instance);
        Ok(())
    }

    /// Removes an instance entirely (the same as [`InstanceState::Gone`] for the controllers).
    pub fn remove_instance(&self, name: &str) -> Option<FakeInstance> {
        self.shared.world.lock().remove_instance(name)
    }

    /// Changes an instance in place, e.g. its type or labels (not re-validated: the test owns
    /// what it writes).
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

    /// Makes the next `lookups` lookups of instance `name` (by any method) report it missing,
    /// as an eventually consistent cloud does; `0` cancels. Tests the lifecycle controller's
    /// guard against deleting Nodes whose instances do exist.
    pub fn set_stale_reads(&self, name: &str, lookups: u32) -> Result<(), UnknownInstance> {
        if self.shared.world.lock().add_stale_reads(name, lookups) {
            Ok(())
        } else {
            Err(UnknownInstance(name.to_owned()))
        }
    }

    /// One instance, by name.
    pub fn instance(&self, name: &str) -> Option<FakeInstance> {
        self.shared.world.lock().instance_by_name(name).cloned()
    }

    /// All instances, in the order they were added (named apart from the `instances` facet).
    pub fn all_instances(&self) -> Vec<FakeInstance> {
        self.shared.world.lock().instances().to_vec()
    }

    // ---- load balancers, routes, clusters ----

    /// All load balancers, ordered by name.
    pub fn load_balancers(&self) -> Vec<FakeLoadBalancer> {
        self.shared.world.lock().load_balancers()
    }

    /// How many backend nodes each load balancer has, by Service `namespace/name`, without
    /// copying any name: what a benchmark polls to see every load balancer hold every node.
    pub fn load_balancer_node_counts(&self) -> std::collections::BTreeMap<String, usize> {
        self.shared.world.lock().load_balancer_node_counts()
    }

    /// The load balancer of the Service `namespace/name`, if there is one. A re-created Service
    /// (new UID) whose old load balancer was never deleted has two; this returns the first by
    /// name, [`Self::load_balancers`] shows both.
    pub fn lb_for(&self, service: &str) -> Option<FakeLoadBalancer> {
        self.shared
            .world
            .lock()
            .load_balancers()
            .into_iter()
            .find(|lb| lb.service == service)
    }

    /// The routes of `cluster_name`, ordered by destination CIDR, without a logged call.
    pub fn route_table(&self, cluster_name: &str) -> Vec<Route> {
        self.shared.world.lock().routes(cluster_name)
    }

    /// Puts a route into the cloud directly (e.g. a stale one the controller should delete);
    /// replaces a route with the same destination CIDR.
    pub fn add_route(&self, cluster_name: &str, route: Route) {
        self.shared.world.lock().put_route(cluster_name, route);
    }

    /// Marks the route to `destination_cidr` as blackholed (its target is gone), or not;
    /// false when the cloud has no such route.
    #[must_use = "false means no route matched: a typo in the test"]
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

    /// Runs one provider call: the quota (which may refuse it at once), latency, then a hold,
    /// then a fault or `op` on the world; logs it.
    async fn call<T>(
        &self,
        method: Method,
        key: impl Into<String>,
        op: impl FnOnce(&mut World) -> Result<T, CloudError>,
    ) -> Result<T, CloudError> {
        let key = key.into();
        let caller = self.caller.lock().clone();
        let started = tokio::time::Instant::now();
        let result = match self.shared.quota.admit(method) {
            Err(refused) => Err(refused),
            Ok(()) => {
                if let Some(latency) = self.shared.faults.latency(method) {
                    tokio::time::sleep(latency).await;
                }
                self.shared.gates.pass(method).await;
                match self.shared.faults.take_fault(method, &key) {
                    Some(fault) => Err(fault.fire().await),
                    None => op(&mut self.shared.world.lock()),
                }
            }
        };

        self.shared.faults.record(CloudCall {
            method,
            key,
            caller,
            outcome: match &result {
                Ok(_) => CallOutcome::Ok,
                Err(err) => CallOutcome::Err(err.to_string()),
            },
            started,
            finished: tokio::time::Instant::now(),
        });
        result
    }

    /// Logs a call that cannot fail or wait (the synchronous `GetLoadBalancerName`).
    fn record_infallible(&self, method: Method, key: String) {
        let caller = self.caller.lock().clone();
        let now = tokio::time::Instant::now();
        self.shared.faults.record(CloudCall {
            method,
            key,
            caller,
            outcome: CallOutcome::Ok,
            started: now,
            finished: now,
        });
    }
}

impl FakeCloud {
    /// Parks every call of `method` (after its latency, before faults and work) until the
    /// returned hold is released; holding a held method again shares the same hold.
    pub fn hold(&self, method: Method) -> HeldCalls {
        self.shared.gates.hold(method)
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

#[cfg(test)]
mod factory_tests;
#[cfg(test)]
mod tests;
