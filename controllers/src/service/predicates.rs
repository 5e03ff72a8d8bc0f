//! Pure predicates of the service controller: which Services want a load balancer, which need
//! cleanup, which spec changes warrant a sync, and which Nodes may back a load balancer.
//!
//! Every function here mirrors a helper of upstream `controllers/service/controller.go`
//! (kubernetes/cloud-provider) and is table-tested below; nothing here talks to the API or the cloud.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The finalizer that keeps a Service object alive until its load balancer is gone, so a delete
/// during a controller restart cannot leak the load balancer (kubernetes/kubernetes #53451).
pub const LOAD_BALANCER_CLEANUP_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// Node label with which an operator keeps a node out of every load balancer's backend set.
pub const EXCLUDE_FROM_LOAD_BALANCERS_LABEL: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";

/// Taint the cluster autoscaler puts on a node it is about to remove; such nodes leave LBs early.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

/// Whether this controller is responsible for a load balancer for `svc`: type LoadBalancer and no
/// `spec.loadBalancerClass` (a class hands the Service to another implementation).
pub fn wants_load_balancer(svc: &Service) -> bool {
    svc.spec.as_ref().is_some_and(|spec| {
        spec.type_.as_deref() == Some("LoadBalancer") && spec.load_balancer_class.is_none()
    })
}

/// Whether `svc` carries the cleanup finalizer, i.e. a load balancer may exist for it.
pub fn has_cleanup_finalizer(svc: &Service) -> bool {
    svc.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == LOAD_BALANCER_CLEANUP_FINALIZER))
}

/// Whether a load balancer must be torn down: the finalizer is there and the Service is being
/// deleted or is no longer of type LoadBalancer.
pub fn needs_cleanup(svc: &Service) -> bool {
    if !has_cleanup_finalizer(svc) {
        return false;
    }
    let is_lb_type = svc
        .spec
        .as_ref()
        .is_some_and(|s| s.type_.as_deref() == Some("LoadBalancer"));
    svc.metadata.deletion_timestamp.is_some() || !is_lb_type
}

/// Which rule of upstream `needsUpdate` fired; kept as a value so logs and tests can tell them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateCause {
    /// Rule 1: the Service started or stopped wanting a load balancer.
    WantsLoadBalancer,
    /// Rule 2: `spec.loadBalancerSourceRanges` changed (order-sensitive).
    SourceRanges,
    /// Rule 3: a port's name, protocol, port, nodePort, targetPort or appProtocol changed.
    Ports,
    /// Rule 4: `spec.sessionAffinity` or `spec.sessionAffinityConfig` changed.
    SessionAffinity,
    /// Rule 5: `spec.loadBalancerIP` changed.
    LoadBalancerIp,
    /// Rule 6: `spec.externalIPs` changed.
    ExternalIps,
    /// Rule 7: any annotation changed.
    Annotations,
    /// Rule 8: the UID changed (the Service was recreated).
    Uid,
    /// Rule 9: `spec.externalTrafficPolicy` changed.
    ExternalTrafficPolicy,
    /// Rule 10: `spec.healthCheckNodePort` changed.
    HealthCheckNodePort,
    /// Rule 11: the number of `spec.ipFamilies` changed.
    IpFamilies,
}

/// The first of the 11 upstream `needsUpdate` rules that makes an update of `old` into `new`
/// worth a load-balancer sync, or `None` when the change is irrelevant to the load balancer.
pub fn update_cause(old: &Service, new: &Service) -> Option<UpdateCause> {
    let (old_wants, new_wants) = (wants_load_balancer(old), wants_load_balancer(new));
    if !old_wants && !new_wants {
        return None;
    }
    if old_wants != new_wants {
        return Some(UpdateCause::WantsLoadBalancer);
    }
    let default_spec = Default::default();
    let o = old.spec.as_ref().unwrap_or(&default_spec);
    let n = new.spec.as_ref().unwrap_or(&default_spec);
    if o.load_balancer_source_ranges != n.load_balancer_source_ranges {
        return Some(UpdateCause::SourceRanges);
    }
    if !ports_equal_for_lb(o.ports.as_deref(), n.ports.as_deref()) {
        return Some(UpdateCause::Ports);
    }
    if o.session_affinity != n.session_affinity
        || o.session_affinity_config != n.session_affinity_config
    {
        return Some(UpdateCause::SessionAffinity);
    }
    if o.load_balancer_ip.as_deref().unwrap_or_default()
        != n.load_balancer_ip.as_deref().unwrap_or_default()
    {
        return Some(UpdateCause::LoadBalancerIp);
    }
    if o.external_ips.as_deref().unwrap_or_default()
        != n.external_ips.as_deref().unwrap_or_default()
    {
        return Some(UpdateCause::ExternalIps);
    }
    if old.metadata.annotations != new.metadata.annotations {
        return Some(UpdateCause::Annotations);
    }
    if old.metadata.uid != new.metadata.uid {
        return Some(UpdateCause::Uid);
    }
    if o.external_traffic_policy.as_deref().unwrap_or_default()
        != n.external_traffic_policy.as_deref().unwrap_or_default()
    {
        return Some(UpdateCause::ExternalTrafficPolicy);
    }
    if o.health_check_node_port.unwrap_or(0) != n.health_check_node_port.unwrap_or(0) {
        return Some(UpdateCause::HealthCheckNodePort);
    }
    let families =
        |s: &k8s_openapi::api::core::v1::ServiceSpec| s.ip_families.as_ref().map_or(0, Vec::len);
    if families(o) != families(n) {
        return Some(UpdateCause::IpFamilies);
    }
    None
}

/// Whether a Service update must be synced (upstream `needsUpdate`); see [`update_cause`].
pub fn needs_update(old: &Service, new: &Service) -> bool {
    update_cause(old, new).is_some()
}

fn ports_equal_for_lb(old: Option<&[ServicePort]>, new: Option<&[ServicePort]>) -> bool {
    let (old, new) = (old.unwrap_or_default(), new.unwrap_or_default());
    old.len() == new.len() && old.iter().zip(new).all(|(a, b)| port_equal_for_lb(a, b))
}

/// Go compares zero values, so an unset field equals its zero value here.
fn port_equal_for_lb(a: &ServicePort, b: &ServicePort) -> bool {
    let zero_target = IntOrString::Int(0);
    a.name.as_deref().unwrap_or_default() == b.name.as_deref().unwrap_or_default()
        && a.protocol.as_deref().unwrap_or_default() == b.protocol.as_deref().unwrap_or_default()
        && a.port == b.port
        && a.node_port.unwrap_or(0) == b.node_port.unwrap_or(0)
        && a.target_port.as_ref().unwrap_or(&zero_target)
            == b.target_port.as_ref().unwrap_or(&zero_target)
        && a.app_protocol == b.app_protocol
}

/// Parses a boolean the way Go's `strconv.ParseBool` does, because the exclusion label's meaning
/// depends on exactly which spellings count as `false`.
pub fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Node predicate: the node is not being deleted.
pub fn node_not_deleted(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none()
}

/// Node predicate: the exclusion label is absent or parses as `false`; `true` or an unparsable
/// value excludes the node (upstream fails closed).
pub fn node_included(node: &Node) -> bool {
    match node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(EXCLUDE_FROM_LOAD_BALANCERS_LABEL))
    {
        None => true,
        Some(value) => parse_go_bool(value) == Some(false),
    }
}

/// Node predicate: the cluster autoscaler has not marked the node for removal.
pub fn node_untainted(node: &Node) -> bool {
    !node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TO_BE_DELETED_TAINT))
}

/// The stable node-set predicate: readiness is deliberately ignored so that Ready/NotReady flaps
/// do not reconfigure every load balancer (KEP-3458).
pub fn stable_node_predicate(node: &Node) -> bool {
    node_not_deleted(node) && node_included(node) && node_untainted(node)
}

/// Keeps the nodes that may back a load balancer, in their original order.
pub fn filter_lb_nodes(nodes: &[Arc<Node>]) -> Vec<Arc<Node>> {
    nodes
        .iter()
        .filter(|n| stable_node_predicate(n))
        .cloned()
        .collect()
}

/// Whether a Node update can change any load balancer's backends: the inclusion result or the
/// provider ID changed. Taints, readiness and other labels deliberately do not count.
pub fn should_sync_updated_node(old: &Node, new: &Node) -> bool {
    if node_included(old) != node_included(new) {
        return true;
    }
    provider_id(old) != provider_id(new)
}

/// The Node's `spec.providerID`, empty when unset (as Go reads it).
pub fn provider_id(node: &Node) -> &str {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default()
}

/// Whether two backend sets are the same for the cloud (same size, same name → providerID map),
/// so an unchanged set never costs an `UpdateLoadBalancer` call.
pub fn nodes_sufficiently_equal(a: &[Arc<Node>], b: &[Arc<Node>]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let index = |nodes: &[Arc<Node>]| -> BTreeMap<String, String> {
        nodes
            .iter()
            .map(|n| {
                (
                    n.metadata.name.clone().unwrap_or_default(),
                    provider_id(n).to_string(),
                )
            })
            .collect()
    };
    index(a) == index(b)
}

#[cfg(test)]
#[path = "predicates_tests.rs"]
mod tests;
