//! The fake cloud's world: its instances, load balancers, routes and clusters, and the lookups
//! the facets share. Everything here is plain data behind one mutex in [`super::FakeCloud`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Node, NodeAddress};
use serde::Deserialize;

use super::config_error::{ConfigError, SourceLine};
use super::ip_pool::IpPool;
use super::lb_store::{FakeLoadBalancer, NodeSets, StoredLb};
use cloud_controllers::cloud::{CloudError, Route};

/// Which parts of the provider contract the fake offers, so tests can check how controllers
/// behave on clouds that lack one (upstream: the accessor returns `false`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[allow(missing_docs)] // each field switches the facet of the same name
pub struct Facets {
    pub load_balancer: bool,
    #[serde(rename = "instancesV2")]
    pub instances_v2: bool,
    pub instances: bool,
    pub zones: bool,
    pub routes: bool,
    pub clusters: bool,
}

impl Facets {
    /// Every facet; the default.
    pub fn all() -> Self {
        Self {
            load_balancer: true,
            instances_v2: true,
            instances: true,
            zones: true,
            routes: true,
            clusters: true,
        }
    }

    /// No facet; start from here to offer only a few.
    pub fn none() -> Self {
        Self {
            load_balancer: false,
            instances_v2: false,
            instances: false,
            zones: false,
            routes: false,
            clusters: false,
        }
    }
}

impl Default for Facets {
    fn default() -> Self {
        Self::all()
    }
}

/// Whether the machine behind a Node runs; drives the node-lifecycle controller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// The instance exists and runs.
    #[default]
    Running,
    /// The instance exists but is stopped: exists=true, shutdown=true.
    Shutdown,
    /// The instance is still being created: it exists and runs, but `InstanceMetadata` returns
    /// `None` (no metadata yet), so its Node stays uninitialized. Not an upstream state; it
    /// models a cloud whose metadata lags behind the VM.
    Pending,
    /// The instance was deleted: exists=false, lookups fail with `InstanceNotFound`.
    Gone,
}

/// The instance type of instances that do not name one, so the node controller always has a
/// type label to set.
pub const DEFAULT_INSTANCE_TYPE: &str = "fake.small";

/// A machine in the fake cloud; what `InstanceMetadata` reports for its Node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FakeInstance {
    /// Node name the instance registers as.
    pub name: String,
    /// `<provider>://<id>`; empty means `<provider>://<name>` when added to a cloud.
    pub provider_id: String,
    /// Instance type label value.
    pub instance_type: String,
    /// Zone label value.
    pub zone: String,
    /// Region label value.
    pub region: String,
    /// Addresses reported for the Node.
    pub addresses: Vec<NodeAddress>,
    /// Running, shut down or gone.
    pub state: InstanceState,
    /// Extra labels reported in `InstanceMetadata`.
    pub additional_labels: BTreeMap<String, String>,
}

impl FakeInstance {
    /// A running instance called `name`, with type [`DEFAULT_INSTANCE_TYPE`] and nothing else.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            instance_type: DEFAULT_INSTANCE_TYPE.to_owned(),
            ..Self::default()
        }
    }

    /// Sets the provider ID instead of the default `<provider>://<name>`.
    pub fn provider_id(mut self, provider_id: impl Into<String>) -> Self {
        self.provider_id = provider_id.into();
        self
    }

    /// Sets the instance type.
    pub fn instance_type(mut self, instance_type: impl Into<String>) -> Self {
        self.instance_type = instance_type.into();
        self
    }

    /// Sets zone and region.
    pub fn zone(mut self, zone: impl Into<String>, region: impl Into<String>) -> Self {
        self.zone = zone.into();
        self.region = region.into();
        self
    }

    /// Adds an address of any type (`InternalIP`, `ExternalIP`, `Hostname`, ...).
    pub fn address(mut self, type_: impl Into<String>, address: impl Into<String>) -> Self {
        self.addresses.push(NodeAddress {
            type_: type_.into(),
            address: address.into(),
        });
        self
    }

    /// Adds an `InternalIP` address.
    pub fn internal_ip(self, address: impl Into<String>) -> Self {
        self.address("InternalIP", address)
    }

    /// Adds an `ExternalIP` address.
    pub fn external_ip(self, address: impl Into<String>) -> Self {
        self.address("ExternalIP", address)
    }

    /// Sets the state.
    pub fn state(mut self, state: InstanceState) -> Self {
        self.state = state;
        self
    }

    /// Adds an extra label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.additional_labels.insert(key.into(), value.into());
        self
    }

    pub(super) fn with_default_provider_id(mut self, provider_name: &str) -> Self {
        if self.provider_id.is_empty() {
            self.provider_id = format!("{provider_name}://{}", self.name);
        }
        self
    }

    /// The instance unless it is gone; what every lookup sees.
    fn existing(&self) -> Option<&FakeInstance> {
        (self.state != InstanceState::Gone).then_some(self)
    }
}

/// Returned by the test API when it names an instance the cloud does not have, so a typo in a
/// test fails loudly instead of silently changing nothing.
#[derive(Debug, thiserror::Error)]
#[error("the fake cloud has no instance named {0:?}")]
pub struct UnknownInstance(pub String);

/// The address types the API server accepts for `NodeAddress.type`.
pub(super) const ADDRESS_TYPES: [&str; 5] = [
    "Hostname",
    "InternalIP",
    "ExternalIP",
    "InternalDNS",
    "ExternalDNS",
];

/// Checks one instance on its own (uniqueness is checked by the caller, which knows the rest).
pub(super) fn validate_instance(instance: &FakeInstance) -> Result<(), ConfigError> {
    if instance.name.trim().is_empty() {
        return Err(ConfigError::EmptyInstanceName {
            at: SourceLine::default(),
        });
    }
    for address in &instance.addresses {
        validate_address(&instance.name, address, SourceLine::default())?;
    }
    Ok(())
}

/// Checks an address type is one Kubernetes knows and that `*IP` addresses parse as IPs.
pub(super) fn validate_address(
    instance: &str,
    address: &NodeAddress,
    at: SourceLine,
) -> Result<(), ConfigError> {
    if !ADDRESS_TYPES.contains(&address.type_.as_str()) {
        return Err(ConfigError::InvalidAddressType {
            instance: instance.to_owned(),
            type_: address.type_.clone(),
            at,
        });
    }
    if address.type_.ends_with("IP") && address.address.parse::<IpAddr>().is_err() {
        return Err(ConfigError::InvalidNodeAddress {
            instance: instance.to_owned(),
            address: address.address.clone(),
            at,
        });
    }
    Ok(())
}

/// The Node's `spec.providerID`, unless unset or empty.
fn node_provider_id(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|id| !id.is_empty())
}

/// Everything the fake cloud holds.
pub(super) struct World {
    /// The cloud's provider name, to tell its provider IDs from another cloud's.
    provider_name: String,
    /// Whether lookups of unknown node names create instances (see [`World::adopt`]).
    pub(super) adopt_unknown_nodes: bool,
    /// Whether `InstanceMetadata` leaves the provider ID empty.
    pub(super) metadata_without_provider_id: bool,
    instances: Vec<FakeInstance>,
    pub(super) load_balancers: BTreeMap<String, StoredLb>,
    /// The backend node sets the load balancers share.
    pub(super) node_sets: NodeSets,
    pub(super) pool: IpPool,
    /// instance name -> how many more lookups miss it (see [`World::add_stale_reads`]).
    stale_reads: HashMap<String, u32>,
    /// Names of removed instances: lookups of them say "not found", not "never configured".
    removed: HashSet<String>,
    /// cluster name -> destination CIDR -> route.
    routes: BTreeMap<String, BTreeMap<String, Route>>,
    /// cluster name -> control-plane address.
    clusters: BTreeMap<String, String>,
}

impl World {
    pub(super) fn new(provider_name: &str, pool: IpPool) -> Self {
        Self {
            provider_name: provider_name.to_owned(),
            adopt_unknown_nodes: false,
            metadata_without_provider_id: false,
            instances: Vec::new(),
            load_balancers: BTreeMap::new(),
            node_sets: NodeSets::default(),
            pool,
            stale_reads: HashMap::new(),
            removed: HashSet::new(),
            routes: BTreeMap::new(),
            clusters: BTreeMap::new(),
        }
    }

    // ---- instances ----

    pub(super) fn instances(&self) -> &[FakeInstance] {
        &self.instances
    }

    pub(super) fn upsert_instance(&mut self, instance: FakeInstance) {
        self.removed.remove(&instance.name);
        match self.instances.iter_mut().find(|i| i.name == instance.name) {
            Some(existing) => *existing = instance,
            None => self.instances.push(instance),
        }
    }

    pub(super) fn remove_instance(&mut self, name: &str) -> Option<FakeInstance> {
        let index = self.instances.iter().position(|i| i.name == name)?;
        self.stale_reads.remove(name);
        self.removed.insert(name.to_owned());
        Some(self.instances.remove(index))
    }

    pub(super) fn instance_mut(&mut self, name: &str) -> Option<&mut FakeInstance> {
        self.instances.iter_mut().find(|i| i.name == name)
    }

    /// By name, including gone instances (for the test API).
    pub(super) fn instance_by_name(&self, name: &str) -> Option<&FakeInstance> {
        self.instances.iter().find(|i| i.name == name)
    }

    /// By provider ID, including gone instances (for the test API).
    pub(super) fn instance_by_provider_id(&self, provider_id: &str) -> Option<&FakeInstance> {
        self.instances.iter().find(|i| i.provider_id == provider_id)
    }

    /// Rejects a provider ID of another cloud, as real providers do when they parse it: answering
    /// "no such instance" instead would make the lifecycle controller delete the Node. An ID an
    /// instance was configured with is always this cloud's, whatever its scheme.
    pub(super) fn check_provider_id(&self, provider_id: &str) -> Result<(), CloudError> {
        let ours = provider_id
            .strip_prefix(self.provider_name.as_str())
            .is_some_and(|rest| rest.starts_with("://"));
        if ours || self.instance_by_provider_id(provider_id).is_some() {
            Ok(())
        } else {
            Err(CloudError::other(format!(
                "provider ID {provider_id:?} does not belong to cloud provider {:?} \
                 (expected {}://...)",
                self.provider_name, self.provider_name
            )))
        }
    }

    /// [`Self::check_provider_id`] for the Node's `spec.providerID`, when it has one.
    pub(super) fn check_node(&self, node: &Node) -> Result<(), CloudError> {
        match node_provider_id(node) {
            Some(id) => self.check_provider_id(id),
            None => Ok(()),
        }
    }

    /// The existing instance called `name`; `Ok(None)` means `InstanceNotFound`. A name this
    /// cloud never had (not configured, added or adopted) is an error, not "not found": a fake
    /// pointed at a real cluster must not tell the lifecycle controller to delete Nodes it knows
    /// nothing about.
    pub(super) fn lookup_name(&mut self, name: &str) -> Result<Option<&FakeInstance>, CloudError> {
        let index = match self.instances.iter().position(|i| i.name == name) {
            Some(index) => index,
            None => match self.adopt(name) {
                Some(index) => index,
                None if self.removed.contains(name) => return Ok(None),
                None => return Err(self.not_configured(name)),
            },
        };
        Ok(self.visible(index))
    }

    fn not_configured(&self, name: &str) -> CloudError {
        CloudError::other(format!(
            "fake cloud {:?} has no instance named {name:?} and leaves that Node alone: list it \
             under instances: in --cloud-config, or set adoptUnknownNodes: true",
            self.provider_name
        ))
    }

    /// The existing instance with `provider_id`; `None` means `InstanceNotFound`.
    pub(super) fn lookup_provider_id(&mut self, provider_id: &str) -> Option<&FakeInstance> {
        let found = self
            .instances
            .iter()
            .position(|i| i.provider_id == provider_id);
        let index = match found {
            Some(index) => index,
            None => {
                let prefix = format!("{}://", self.provider_name);
                let name = provider_id.strip_prefix(&prefix)?;
                if self.instance_by_name(name).is_some() {
                    return None;
                }
                self.adopt(name)?
            }
        };
        self.visible(index)
    }

    /// With adoption on, makes a running instance for a node name nobody registered, so `--dev`
    /// can initialize whatever Nodes the cluster has. Returns its index.
    fn adopt(&mut self, name: &str) -> Option<usize> {
        if !self.adopt_unknown_nodes || name.is_empty() {
            return None;
        }
        tracing::info!(
            node = name,
            "fake cloud: adopting unknown node as a running instance"
        );
        let instance = FakeInstance::new(name).with_default_provider_id(&self.provider_name);
        self.instances.push(instance);
        Some(self.instances.len() - 1)
    }

    /// The existing instance behind `node`: by `spec.providerID` when set, else by node name,
    /// as real providers do. A provider ID that matches nothing does not fall back to the name.
    pub(super) fn lookup_node(&mut self, node: &Node) -> Result<Option<&FakeInstance>, CloudError> {
        match node_provider_id(node) {
            Some(id) => Ok(self.lookup_provider_id(id)),
            None => self.lookup_name(node.metadata.name.as_deref().unwrap_or_default()),
        }
    }

    /// What a lookup of the instance at `index` sees: nothing when it is gone, or when a stale
    /// read is pending for it (which this lookup consumes).
    fn visible(&mut self, index: usize) -> Option<&FakeInstance> {
        let instance = &self.instances[index];
        if let Some(misses) = self.stale_reads.get_mut(&instance.name) {
            *misses -= 1;
            if *misses == 0 {
                self.stale_reads.remove(&instance.name);
            }
            return None;
        }
        instance.existing()
    }

    /// Makes the next `lookups` lookups of `name` miss it, as an eventually consistent cloud
    /// API does; false when there is no such instance.
    pub(super) fn add_stale_reads(&mut self, name: &str, lookups: u32) -> bool {
        if self.instance_by_name(name).is_none() {
            return false;
        }
        if lookups == 0 {
            self.stale_reads.remove(name);
        } else {
            self.stale_reads.insert(name.to_owned(), lookups);
        }
        true
    }

    // ---- load balancers ----

    pub(super) fn load_balancers(&self) -> Vec<FakeLoadBalancer> {
        let mut lbs: Vec<_> = self.load_balancers.values().map(StoredLb::view).collect();
        lbs.sort_by(|a, b| a.name.cmp(&b.name));
        lbs
    }

    pub(super) fn load_balancer_node_counts(&self) -> BTreeMap<String, usize> {
        self.load_balancers
            .values()
            .map(|lb| (lb.service().to_owned(), lb.node_count()))
            .collect()
    }

    // ---- routes ----

    pub(super) fn routes(&self, cluster_name: &str) -> Vec<Route> {
        self.routes
            .get(cluster_name)
            .map(|r| r.values().cloned().collect())
            .unwrap_or_default()
    }

    pub(super) fn route_by_cidr(&self, cluster_name: &str, cidr: &str) -> Option<&Route> {
        self.routes.get(cluster_name)?.get(cidr)
    }

    pub(super) fn put_route(&mut self, cluster_name: &str, route: Route) {
        self.routes
            .entry(cluster_name.to_owned())
            .or_default()
            .insert(route.destination_cidr.clone(), route);
    }

    /// Removes the route called `name`; returns whether there was one.
    pub(super) fn remove_route(&mut self, cluster_name: &str, name: &str) -> bool {
        let Some(routes) = self.routes.get_mut(cluster_name) else {
            return false;
        };
        let before = routes.len();
        routes.retain(|_, r| r.name != name);
        routes.len() != before
    }

    pub(super) fn set_route_blackhole(
        &mut self,
        cluster_name: &str,
        cidr: &str,
        blackhole: bool,
    ) -> bool {
        match self
            .routes
            .get_mut(cluster_name)
            .and_then(|r| r.get_mut(cidr))
        {
            Some(route) => {
                route.blackhole = blackhole;
                true
            }
            None => false,
        }
    }

    // ---- clusters ----

    pub(super) fn add_cluster(&mut self, name: String, master: String) {
        self.clusters.insert(name, master);
    }

    pub(super) fn cluster_names(&self) -> Vec<String> {
        self.clusters.keys().cloned().collect()
    }

    pub(super) fn cluster_master(&self, name: &str) -> Option<&str> {
        self.clusters.get(name).map(String::as_str)
    }
}
