//! Plain data exchanged with providers. Kubernetes types (`NodeAddress`, `LoadBalancerStatus`)
//! are reused as they are so nothing is converted twice.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeAddress;

/// What the cloud knows about the machine behind a Node (upstream `cloudprovider.InstanceMetadata`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceMetadata {
    /// `<provider>://<id>`; set on the Node only if it has none yet.
    pub provider_id: String,
    /// Becomes the `node.kubernetes.io/instance-type` label (and its beta twin).
    pub instance_type: String,
    /// Becomes `status.addresses`, after the provided-node-ip rules.
    pub node_addresses: Vec<NodeAddress>,
    /// Becomes the `topology.kubernetes.io/zone` label (and its beta twin).
    pub zone: String,
    /// Becomes the `topology.kubernetes.io/region` label (and its beta twin).
    pub region: String,
    /// Extra labels; keys in the kubernetes.io / k8s.io namespaces are dropped.
    pub additional_labels: BTreeMap<String, String>,
}

/// A failure domain (upstream `cloudprovider.Zone`), used only on the legacy Instances path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Zone {
    /// Zone name.
    pub failure_domain: String,
    /// Region name.
    pub region: String,
}

/// A pod-network route in the cloud (upstream `cloudprovider.Route`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Route {
    /// Provider's name for the route; ignored on create.
    pub name: String,
    /// Name of the Node the route sends traffic to.
    pub target_node: String,
    /// When true the route controller also compares `target_node_addresses`.
    pub enable_node_addresses: bool,
    /// Addresses of the target node when the route was made.
    pub target_node_addresses: Vec<NodeAddress>,
    /// The pod CIDR the route covers.
    pub destination_cidr: String,
    /// The cloud reports the route as blackholed (its target is gone); such routes are deleted.
    pub blackhole: bool,
}
