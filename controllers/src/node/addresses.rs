//! Node addresses: the `alpha.kubernetes.io/provided-node-ip` rules, hostname retention, upstream's
//! change detection and the `nodes/status` patch (upstream `updateNodeAddress`,
//! `GetNodeAddressesFromNodeIP`, `nodeAddressesChangeDetected`, `PatchNodeStatus`).
//!
//! The status patch follows upstream's `PatchNodeStatus`. Over a non-empty list it ends with a
//! `{"$patch": "replace"}` element, so the new list replaces the old one whole. Over an empty or
//! absent list it must not: a real kube-apiserver keeps that directive as one more element and
//! stores it as an empty address `{"type": "", "address": ""}`, which is what kubelet's
//! `--cloud-provider=external` Nodes would get on initialization. There the list is sent plain:
//! over a list the server does not have, it is stored as sent; over one kubelet wrote since the
//! Node we patch from was read (the periodic refresh works from the cache), it merges by its
//! merge key, `type` (entries of different types that share one IP all stay). That merge folds a
//! list naming one type twice into one item (dual-stack InternalIPs, kubernetes#79391), so such a
//! list goes as a JSON merge patch, which sets it as given.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use k8s_openapi::api::core::v1::{Node, NodeAddress};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{PROVIDED_NODE_IP_ANNOTATION, has_uninitialized_taint};

/// Why the provided node IP could not be honoured; the node keeps its uninitialized taint (during
/// initialization) or its old addresses (periodic refresh) until this is fixed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AddressError {
    /// An entry of the annotation is not an IP address.
    #[error("failed to parse node IP {annotation:?}: could not parse {entry:?}")]
    Unparsable {
        /// The whole annotation value.
        annotation: String,
        /// The entry that failed.
        entry: String,
    },
    /// More than two IPs were given.
    #[error(
        "failed to parse node IP {annotation:?}: must contain either a single IP or a dual-stack pair of IPs"
    )]
    TooMany {
        /// The whole annotation value.
        annotation: String,
    },
    /// Two IPs of the same family were given.
    #[error(
        "failed to parse node IP {annotation:?}: dual-stack node IP must be a pair of one IPv4 and one IPv6 address"
    )]
    SameFamily {
        /// The whole annotation value.
        annotation: String,
    },
    /// A dual-stack pair contained `0.0.0.0` or `::`.
    #[error(
        "failed to parse node IP {annotation:?}: dual-stack node IP cannot include '0.0.0.0' or '::'"
    )]
    UnspecifiedInPair {
        /// The whole annotation value.
        annotation: String,
    },
    /// The cloud reported no address equal to the provided node IP.
    #[error("failed to get node address from cloud provider that matches ip: {ip}")]
    NoMatch {
        /// The node IP that matched nothing.
        ip: IpAddr,
    },
}

/// Parses one IP like Go's `netutils.ParseIPSloppy`: IPv4 octets may carry leading zeros (read as
/// decimal) and IPv4-mapped IPv6 addresses count as IPv4, so comparisons agree with upstream.
pub fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if s.contains(':') {
        let ip: IpAddr = s.parse().ok()?;
        return Some(canonical(ip));
    }
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *octet = part.parse().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(IpAddr::V4(Ipv4Addr::from(octets)))
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Parses the provided-node-ip annotation as kubelet wrote it: one IP, or a comma-separated
/// dual-stack pair of different families, neither unspecified (upstream `ParseNodeIPAnnotation`).
pub fn parse_provided_node_ip(annotation: &str) -> Result<Vec<IpAddr>, AddressError> {
    let mut ips = Vec::new();
    for entry in annotation.split(',') {
        match parse_ip_sloppy(entry) {
            Some(ip) => ips.push(ip),
            None => {
                return Err(AddressError::Unparsable {
                    annotation: annotation.to_string(),
                    entry: entry.to_string(),
                });
            }
        }
    }
    let annotation = annotation.to_string();
    match ips.as_slice() {
        [_, _, _, ..] => Err(AddressError::TooMany { annotation }),
        [a, b] if a.is_ipv6() == b.is_ipv6() => Err(AddressError::SameFamily { annotation }),
        [a, b] if a.is_unspecified() || b.is_unspecified() => {
            Err(AddressError::UnspecifiedInPair { annotation })
        }
        _ => Ok(ips),
    }
}

/// Puts the cloud addresses equal to the provided node IPs first and drops the other cloud
/// addresses of the same types, so a node with secondary IPs shows the IP kubelet was told to use
/// (upstream `GetNodeAddressesFromNodeIP`).
pub fn addresses_from_node_ip(
    annotation: &str,
    cloud: &[NodeAddress],
) -> Result<Vec<NodeAddress>, AddressError> {
    let node_ips = parse_provided_node_ip(annotation)?;
    let mut enforced = Vec::new();
    let mut matched_types: Vec<&str> = Vec::new();
    for ip in node_ips {
        let before = enforced.len();
        for addr in cloud {
            if parse_ip_sloppy(&addr.address) == Some(ip) {
                enforced.push(addr.clone());
                matched_types.push(&addr.type_);
            }
        }
        if enforced.len() == before {
            return Err(AddressError::NoMatch { ip });
        }
    }
    enforced.extend(
        cloud
            .iter()
            .filter(|a| !matched_types.contains(&a.type_.as_str()))
            .cloned(),
    );
    Ok(enforced)
}

/// Applies the annotation rules when the Node carries the annotation; otherwise returns the cloud
/// list unchanged (upstream `updateNodeAddressesFromNodeIP`).
pub fn apply_provided_node_ip(
    node: &Node,
    cloud: &[NodeAddress],
) -> Result<Vec<NodeAddress>, AddressError> {
    match node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROVIDED_NODE_IP_ANNOTATION))
    {
        Some(annotation) => addresses_from_node_ip(annotation, cloud),
        None => Ok(cloud.to_vec()),
    }
}

/// The address list the Node should have, or `Ok(None)` when addresses must not be touched (the
/// node is still uninitialized, or the cloud reported nothing). Keeps kubelet's `Hostname`
/// entries when the cloud has none.
pub fn desired_addresses(
    node: &Node,
    cloud: &[NodeAddress],
) -> Result<Option<Vec<NodeAddress>>, AddressError> {
    if has_uninitialized_taint(node) || cloud.is_empty() {
        return Ok(None);
    }
    let mut addresses = cloud.to_vec();
    if !addresses.iter().any(|a| a.type_ == "Hostname") {
        addresses.extend(
            current_addresses(node)
                .iter()
                .filter(|a| a.type_ == "Hostname")
                .cloned(),
        );
    }
    apply_provided_node_ip(node, &addresses).map(Some)
}

/// Upstream's exact change detection: lengths differ, or some new entry's address differs from the
/// last old address of the same type. Reordering and some duplicate-type permutations go
/// unnoticed, as upstream.
pub fn addresses_changed(old: &[NodeAddress], new: &[NodeAddress]) -> bool {
    if old.len() != new.len() {
        return true;
    }
    let by_type: HashMap<&str, &str> = old
        .iter()
        .map(|a| (a.type_.as_str(), a.address.as_str()))
        .collect();
    new.iter()
        .any(|a| by_type.get(a.type_.as_str()).copied().unwrap_or("") != a.address)
}

/// The `nodes/<name>/status` patch that turns the address list `old` into exactly `new`.
pub fn address_status_patch(old: &[NodeAddress], new: &[NodeAddress]) -> Patch<serde_json::Value> {
    let mut list: Vec<serde_json::Value> = new
        .iter()
        .map(|a| json!({ "type": a.type_, "address": a.address }))
        .collect();
    if !old.is_empty() {
        list.push(json!({ "$patch": "replace" }));
        return Patch::Strategic(json!({ "status": { "addresses": list } }));
    }
    let mut types: Vec<&str> = new.iter().map(|a| a.type_.as_str()).collect();
    types.sort_unstable();
    let repeated = types.windows(2).any(|w| w[0] == w[1]);
    let body = json!({ "status": { "addresses": list } });
    if repeated {
        Patch::Merge(body)
    } else {
        Patch::Strategic(body)
    }
}

fn current_addresses(node: &Node) -> &[NodeAddress] {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_deref())
        .unwrap_or(&[])
}

/// Refreshes the Node's addresses from the cloud's list; errors are only logged, as upstream,
/// because the next refresh tries again. Returns whether a patch was sent successfully.
pub async fn update_node_address(api: &Api<Node>, node: &Node, cloud: &[NodeAddress]) -> bool {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let desired = match desired_addresses(node, cloud) {
        Ok(Some(desired)) => desired,
        Ok(None) => return false,
        Err(err) => {
            tracing::error!(node = name, error = %err, "failed to update node addresses");
            return false;
        }
    };
    if !addresses_changed(current_addresses(node), &desired) {
        return false;
    }
    let patch = address_status_patch(current_addresses(node), &desired);
    match api
        .patch_status(name, &PatchParams::default(), &patch)
        .await
    {
        Ok(_) => true,
        Err(err) => {
            tracing::error!(node = name, error = %err, "error patching node with cloud ip addresses");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus, Taint};
    use std::collections::BTreeMap;

    fn addr(type_: &str, address: &str) -> NodeAddress {
        NodeAddress {
            type_: type_.into(),
            address: address.into(),
        }
    }

    fn node(annotation: Option<&str>, addresses: Vec<NodeAddress>) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("n1".into());
        if let Some(a) = annotation {
            n.metadata.annotations = Some(BTreeMap::from([(
                PROVIDED_NODE_IP_ANNOTATION.to_string(),
                a.to_string(),
            )]));
        }
        n.status = Some(NodeStatus {
            addresses: Some(addresses),
            ..Default::default()
        });
        n
    }

    #[test]
    fn parses_single_and_dual_stack_node_ips() {
        assert_eq!(
            parse_provided_node_ip("10.0.0.1").unwrap(),
            vec!["10.0.0.1".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(parse_provided_node_ip("10.0.0.1,fd00::1").unwrap().len(), 2);
        assert_eq!(parse_provided_node_ip("fd00::1,10.0.0.1").unwrap().len(), 2);
        // A single unspecified address parses (it then matches nothing).
        assert!(parse_provided_node_ip("0.0.0.0").is_ok());
        // Sloppy IPv4 like Go: leading zeros are decimal.
        assert_eq!(
            parse_ip_sloppy("010.000.0.01"),
            Some("10.0.0.1".parse().unwrap())
        );
        assert_eq!(
            parse_ip_sloppy("::ffff:10.0.0.1"),
            Some("10.0.0.1".parse().unwrap())
        );
    }

    #[test]
    fn rejects_bad_node_ip_annotations() {
        assert!(matches!(
            parse_provided_node_ip(""),
            Err(AddressError::Unparsable { .. })
        ));
        assert!(matches!(
            parse_provided_node_ip("10.0.0.1, fd00::1"),
            Err(AddressError::Unparsable { .. })
        ));
        assert!(matches!(
            parse_provided_node_ip("bogus"),
            Err(AddressError::Unparsable { .. })
        ));
        assert!(matches!(
            parse_provided_node_ip("10.0.0.1,10.0.0.2"),
            Err(AddressError::SameFamily { .. })
        ));
        assert!(matches!(
            parse_provided_node_ip("10.0.0.1,fd00::1,10.0.0.2"),
            Err(AddressError::TooMany { .. })
        ));
        assert!(matches!(
            parse_provided_node_ip("0.0.0.0,fd00::1"),
            Err(AddressError::UnspecifiedInPair { .. })
        ));
        assert_eq!(parse_ip_sloppy("1.2.3"), None);
        assert_eq!(parse_ip_sloppy("1.2.3.4.5"), None);
        assert_eq!(parse_ip_sloppy("256.1.1.1"), None);
    }

    #[test]
    fn node_ip_goes_first_and_drops_other_addresses_of_its_type() {
        let cloud = vec![
            addr("InternalIP", "10.0.0.2"),
            addr("InternalIP", "10.0.0.1"),
            addr("ExternalIP", "1.2.3.4"),
            addr("Hostname", "n1"),
        ];
        let got = addresses_from_node_ip("10.0.0.1", &cloud).unwrap();
        assert_eq!(
            got,
            vec![
                addr("InternalIP", "10.0.0.1"),
                addr("ExternalIP", "1.2.3.4"),
                addr("Hostname", "n1")
            ]
        );
    }

    #[test]
    fn node_ip_matching_several_types_keeps_each_match() {
        let cloud = vec![
            addr("ExternalIP", "10.0.0.1"),
            addr("InternalIP", "10.0.0.1"),
            addr("InternalIP", "10.0.0.9"),
            addr("InternalIP", "fd00::1"),
        ];
        let got = addresses_from_node_ip("10.0.0.1,fd00::1", &cloud).unwrap();
        assert_eq!(
            got,
            vec![
                addr("ExternalIP", "10.0.0.1"),
                addr("InternalIP", "10.0.0.1"),
                addr("InternalIP", "fd00::1"),
            ]
        );
    }

    #[test]
    fn node_ip_that_matches_nothing_is_an_error() {
        let cloud = vec![addr("InternalIP", "10.0.0.2")];
        assert_eq!(
            addresses_from_node_ip("10.0.0.1", &cloud),
            Err(AddressError::NoMatch {
                ip: "10.0.0.1".parse().unwrap()
            })
        );
        // Each IP of a pair must match.
        assert!(addresses_from_node_ip("10.0.0.2,fd00::1", &cloud).is_err());
    }

    #[test]
    fn hostname_is_kept_when_the_cloud_reports_none() {
        let n = node(
            None,
            vec![
                addr("Hostname", "kubelet-host"),
                addr("InternalIP", "9.9.9.9"),
            ],
        );
        let got = desired_addresses(&n, &[addr("InternalIP", "10.0.0.1")])
            .unwrap()
            .unwrap();
        assert_eq!(
            got,
            vec![
                addr("InternalIP", "10.0.0.1"),
                addr("Hostname", "kubelet-host")
            ]
        );
        // A cloud hostname wins over kubelet's.
        let got = desired_addresses(&n, &[addr("Hostname", "cloud-host")])
            .unwrap()
            .unwrap();
        assert_eq!(got, vec![addr("Hostname", "cloud-host")]);
    }

    #[test]
    fn nothing_is_desired_for_uninitialized_nodes_or_empty_cloud_lists() {
        let mut n = node(None, vec![]);
        assert_eq!(desired_addresses(&n, &[]).unwrap(), None);
        n.spec = Some(NodeSpec {
            taints: Some(vec![Taint {
                key: super::super::UNINITIALIZED_TAINT_KEY.into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        assert_eq!(
            desired_addresses(&n, &[addr("InternalIP", "10.0.0.1")]).unwrap(),
            None
        );
    }

    #[test]
    fn desired_addresses_apply_the_annotation_after_hostname_retention() {
        let n = node(Some("10.0.0.1"), vec![addr("Hostname", "h")]);
        let got = desired_addresses(
            &n,
            &[
                addr("InternalIP", "10.0.0.2"),
                addr("InternalIP", "10.0.0.1"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            got,
            vec![addr("InternalIP", "10.0.0.1"), addr("Hostname", "h")]
        );
        let bad = node(Some("10.9.9.9"), vec![]);
        assert!(desired_addresses(&bad, &[addr("InternalIP", "10.0.0.2")]).is_err());
    }

    #[test]
    fn change_detection_matches_upstream_quirks() {
        let a = addr("InternalIP", "10.0.0.1");
        let b = addr("ExternalIP", "1.2.3.4");
        assert!(!addresses_changed(&[], &[]));
        let one = std::slice::from_ref(&a);
        assert!(addresses_changed(one, &[a.clone(), b.clone()]));
        assert!(addresses_changed(one, &[addr("InternalIP", "10.0.0.2")]));
        assert!(addresses_changed(one, &[addr("ExternalIP", "10.0.0.1")]));
        // Reordering is not a change.
        assert!(!addresses_changed(
            &[a.clone(), b.clone()],
            &[b.clone(), a.clone()]
        ));
        // Same type twice: only the last old entry per type counts, so swapping the two
        // InternalIPs is invisible, while the new list [x, x] vs old [y, x] is a change.
        let x = addr("InternalIP", "10.0.0.1");
        let y = addr("InternalIP", "10.0.0.2");
        assert!(!addresses_changed(
            &[x.clone(), y.clone()],
            &[y.clone(), y.clone()]
        ));
        assert!(addresses_changed(
            &[y.clone(), x.clone()],
            &[y.clone(), y.clone()]
        ));
    }

    fn body(patch: Patch<serde_json::Value>) -> (&'static str, serde_json::Value) {
        match patch {
            Patch::Strategic(v) => ("strategic", v),
            Patch::Merge(v) => ("merge", v),
            other => panic!("unexpected patch type {other:?}"),
        }
    }

    #[test]
    fn status_patch_replaces_a_non_empty_list_whole() {
        let patch = address_status_patch(
            &[addr("InternalIP", "10.0.0.9")],
            &[addr("InternalIP", "10.0.0.1")],
        );
        assert_eq!(
            body(patch),
            (
                "strategic",
                json!({"status": {"addresses": [
                    {"type": "InternalIP", "address": "10.0.0.1"},
                    {"$patch": "replace"}
                ]}})
            )
        );
    }

    #[test]
    fn status_patch_over_an_empty_list_carries_no_directive() {
        let new = [
            addr("InternalIP", "10.0.0.1"),
            addr("ExternalIP", "10.0.0.1"),
        ];
        assert_eq!(
            body(address_status_patch(&[], &new)),
            (
                "strategic",
                json!({"status": {"addresses": [
                    {"type": "InternalIP", "address": "10.0.0.1"},
                    {"type": "ExternalIP", "address": "10.0.0.1"}
                ]}})
            )
        );
        // Two entries of one type would be folded by a merge on `type`: the list is set as given.
        let dual = [
            addr("InternalIP", "10.0.0.1"),
            addr("InternalIP", "fd00::1"),
        ];
        assert_eq!(
            body(address_status_patch(&[], &dual)),
            (
                "merge",
                json!({"status": {"addresses": [
                    {"type": "InternalIP", "address": "10.0.0.1"},
                    {"type": "InternalIP", "address": "fd00::1"}
                ]}})
            )
        );
    }
}
