//! What the world stores of a load balancer: [`StoredLb`] with backend node sets shared by every
//! load balancer that has the same nodes ([`NodeSets`]), and the [`FakeLoadBalancer`] view tests
//! read. The `LoadBalancer` facet (`load_balancers.rs`) writes it; the world (`world.rs`) holds it.
//!
//! Bookkeeping stays small at scale: a pass that updates 1,000 load balancers with the same 3,000
//! nodes stores one set of names, and [`FakeLoadBalancer`] copies it out only when a test looks.

use std::collections::{BTreeSet, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, ServiceSpec};

/// A load balancer in the fake cloud, as tests inspect it.
#[derive(Clone, Debug, PartialEq)]
pub struct FakeLoadBalancer {
    /// Upstream `DefaultLoadBalancerName` of the Service.
    pub name: String,
    /// `namespace/name` of the Service it serves.
    pub service: String,
    /// UID of that Service (the key; empty if the Service had none).
    pub service_uid: String,
    /// `--cluster-name` it was created for.
    pub cluster_name: String,
    /// The ingress address allocated from the pool.
    pub ip: IpAddr,
    /// Names of the backend nodes, sorted.
    pub nodes: Vec<String>,
    /// Service ports it forwards (`spec.ports[].port`), in Service order.
    pub ports: Vec<i32>,
    /// The Service spec of the last successful `EnsureLoadBalancer`, so tests can check that a
    /// spec change (traffic policy, source ranges, ...) reached the cloud.
    pub service_spec: ServiceSpec,
}

/// A load balancer as the world stores it: [`FakeLoadBalancer`] with a shared node set.
#[derive(Clone, Debug)]
pub(super) struct StoredLb {
    pub(super) name: String,
    pub(super) service: String,
    pub(super) service_uid: String,
    pub(super) cluster_name: String,
    pub(super) ip: IpAddr,
    pub(super) nodes: NodeSet,
    pub(super) ports: Vec<i32>,
    pub(super) service_spec: ServiceSpec,
}

impl StoredLb {
    pub(super) fn service(&self) -> &str {
        &self.service
    }

    pub(super) fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// What tests see.
    pub(super) fn view(&self) -> FakeLoadBalancer {
        FakeLoadBalancer {
            name: self.name.clone(),
            service: self.service.clone(),
            service_uid: self.service_uid.clone(),
            cluster_name: self.cluster_name.clone(),
            ip: self.ip,
            nodes: self.nodes.iter().map(|n| n.to_string()).collect(),
            ports: self.ports.clone(),
            service_spec: self.service_spec.clone(),
        }
    }
}

/// Sorted, deduplicated backend node names, shared by every load balancer that has them.
pub(super) type NodeSet = Arc<[Arc<str>]>;

/// Hands out shared [`NodeSet`]s: the set a load balancer already has, or the one handed out
/// last (a node-sync pass gives every load balancer the same nodes), else a new one whose names
/// are interned. Names no set uses any more are pruned, so churn does not grow it.
#[derive(Default)]
pub(super) struct NodeSets {
    names: HashSet<Arc<str>>,
    last: Option<NodeSet>,
}

impl NodeSets {
    pub(super) fn get(&mut self, nodes: &[Arc<Node>], current: Option<&NodeSet>) -> NodeSet {
        let wanted: BTreeSet<&str> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        let same = |set: &NodeSet| set.iter().map(|n| &**n).eq(wanted.iter().copied());
        if let Some(set) = current.filter(|s| same(s)) {
            return Arc::clone(set);
        }
        if let Some(set) = self.last.as_ref().filter(|s| same(s)) {
            return Arc::clone(set);
        }
        let set: NodeSet = wanted
            .iter()
            .map(|name| match self.names.get(*name) {
                Some(interned) => Arc::clone(interned),
                None => {
                    let interned: Arc<str> = Arc::from(*name);
                    self.names.insert(Arc::clone(&interned));
                    interned
                }
            })
            .collect();
        self.last = Some(Arc::clone(&set));
        if self.names.len() > 2 * set.len() + 1024 {
            self.names.retain(|name| Arc::strong_count(name) > 1);
        }
        set
    }
}
