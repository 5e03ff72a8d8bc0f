//! The idempotent changes that initialize a Node from its instance metadata: provider ID, topology
//! and instance-type labels with their deprecated beta twins, filtered additional labels, and
//! removal of the uninitialized taint (upstream `getNodeModifiersFromCloudProvider`).
//!
//! They are re-applied to a fresh copy of the Node on every conflict retry, so each must give the
//! same result when applied twice.

use k8s_openapi::api::core::v1::Node;

use super::UNINITIALIZED_TAINT_KEY;
use super::addresses::{AddressError, apply_provided_node_ip};
use crate::cloud::InstanceMetadata;

/// GA instance-type label.
pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Deprecated beta twin of [`LABEL_INSTANCE_TYPE`].
pub const LABEL_INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
/// GA zone label.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// Deprecated beta twin of [`LABEL_ZONE`].
pub const LABEL_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
/// GA region label.
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";
/// Deprecated beta twin of [`LABEL_REGION`].
pub const LABEL_REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";

/// Everything initialization will write, decided once from the metadata before the retry loop
/// so every attempt applies the same thing.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeModifiers {
    metadata: InstanceMetadata,
}

impl NodeModifiers {
    /// Validates the metadata against `node` (the provided-node-ip annotation must match a cloud
    /// address, or the taint must stay) and captures what to apply.
    pub fn new(node: &Node, metadata: InstanceMetadata) -> Result<Self, AddressError> {
        apply_provided_node_ip(node, &metadata.node_addresses)?;
        Ok(Self { metadata })
    }

    /// The metadata the modifiers were built from, for the address update that follows.
    pub fn metadata(&self) -> &InstanceMetadata {
        &self.metadata
    }

    /// Applies every modifier and removes the uninitialized taint.
    pub fn apply(&self, node: &mut Node) {
        set_provider_id(node, &self.metadata.provider_id);
        set_cloud_labels(node, &self.metadata);
        merge_additional_labels(node, &self.metadata.additional_labels);
        remove_uninitialized_taint(node);
    }
}

/// Sets `spec.providerID` only when the Node has none, because the field is immutable once set.
pub fn set_provider_id(node: &mut Node, provider_id: &str) {
    if provider_id.is_empty() {
        return;
    }
    let spec = node.spec.get_or_insert_with(Default::default);
    if spec.provider_id.as_deref().unwrap_or_default().is_empty() {
        spec.provider_id = Some(provider_id.to_string());
    }
}

/// Writes instance type, zone and region under both the GA and the deprecated beta keys,
/// overwriting existing values, so old and new selectors keep working.
pub fn set_cloud_labels(node: &mut Node, metadata: &InstanceMetadata) {
    let labels = node.metadata.labels.get_or_insert_with(Default::default);
    for (value, ga, beta) in [
        (
            &metadata.instance_type,
            LABEL_INSTANCE_TYPE,
            LABEL_INSTANCE_TYPE_BETA,
        ),
        (&metadata.zone, LABEL_ZONE, LABEL_ZONE_BETA),
        (&metadata.region, LABEL_REGION, LABEL_REGION_BETA),
    ] {
        if !value.is_empty() {
            labels.insert(ga.to_string(), value.clone());
            labels.insert(beta.to_string(), value.clone());
        }
    }
}

/// Whether a label key lies in the kubernetes.io / k8s.io namespaces (or a subdomain of them),
/// which a provider may not claim: the regular expression `(^|\.)(kubernetes|k8s)\.io/`.
pub fn is_reserved_label_key(key: &str) -> bool {
    ["kubernetes.io/", "k8s.io/"].iter().any(|suffix| {
        key.match_indices(suffix)
            .any(|(at, _)| at == 0 || key.as_bytes()[at - 1] == b'.')
    })
}

/// Adds the provider's extra labels, skipping reserved keys and never overwriting a label the Node
/// already has (kubelet or the user may have set it deliberately).
pub fn merge_additional_labels(
    node: &mut Node,
    additional: &std::collections::BTreeMap<String, String>,
) {
    let name = node.metadata.name.clone().unwrap_or_default();
    let labels = node.metadata.labels.get_or_insert_with(Default::default);
    for (key, value) in additional {
        if is_reserved_label_key(key) {
            tracing::warn!(node = %name, label = %key, "discarding additional label in a reserved namespace");
            continue;
        }
        match labels.get(key) {
            Some(existing) if existing != value => {
                tracing::warn!(node = %name, label = %key, existing = %existing, cloud = %value,
                    "additional label already set on the node with a different value; keeping it");
            }
            Some(_) => {}
            None => {
                labels.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Removes every taint keyed `node.cloudprovider.kubernetes.io/uninitialized`, whatever its value
/// or effect, which tells the scheduler the node is ready for workloads.
pub fn remove_uninitialized_taint(node: &mut Node) {
    if let Some(taints) = node.spec.as_mut().and_then(|s| s.taints.as_mut()) {
        taints.retain(|t| t.key != UNINITIALIZED_TAINT_KEY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeAddress, NodeSpec, Taint};
    use std::collections::BTreeMap;

    fn taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn uninitialized_node() -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("n1".into());
        n.spec = Some(NodeSpec {
            taints: Some(vec![
                taint(UNINITIALIZED_TAINT_KEY, "NoSchedule"),
                taint("other", "NoExecute"),
                taint(UNINITIALIZED_TAINT_KEY, "NoExecute"),
            ]),
            ..Default::default()
        });
        n
    }

    fn labels(n: &Node) -> BTreeMap<String, String> {
        n.metadata.labels.clone().unwrap_or_default()
    }

    #[test]
    fn reserved_label_keys_match_the_upstream_regex() {
        for key in [
            "kubernetes.io/foo",
            "k8s.io/foo",
            "node.kubernetes.io/foo",
            "a.b.k8s.io/x",
            "prefix/node.kubernetes.io/x",
        ] {
            assert!(is_reserved_label_key(key), "{key}");
        }
        for key in [
            "example.com/kubernetes.io",
            "mykubernetes.io/foo",
            "k8s.iox/foo",
            "xk8s.io/foo",
            "plain",
            "kubernetes-io/foo",
        ] {
            assert!(!is_reserved_label_key(key), "{key}");
        }
    }

    #[test]
    fn provider_id_is_set_once_and_never_overwritten() {
        let mut n = uninitialized_node();
        set_provider_id(&mut n, "");
        assert_eq!(n.spec.as_ref().unwrap().provider_id, None);
        set_provider_id(&mut n, "fake://a");
        set_provider_id(&mut n, "fake://b");
        assert_eq!(
            n.spec.as_ref().unwrap().provider_id.as_deref(),
            Some("fake://a")
        );
    }

    #[test]
    fn cloud_labels_set_ga_and_beta_twins_and_skip_empty_values() {
        let mut n = uninitialized_node();
        n.metadata.labels = Some(BTreeMap::from([(
            LABEL_ZONE.to_string(),
            "old".to_string(),
        )]));
        let md = InstanceMetadata {
            instance_type: "m5.large".into(),
            zone: "z1".into(),
            ..Default::default()
        };
        set_cloud_labels(&mut n, &md);
        let l = labels(&n);
        assert_eq!(l[LABEL_INSTANCE_TYPE], "m5.large");
        assert_eq!(l[LABEL_INSTANCE_TYPE_BETA], "m5.large");
        assert_eq!(l[LABEL_ZONE], "z1");
        assert_eq!(l[LABEL_ZONE_BETA], "z1");
        assert!(!l.contains_key(LABEL_REGION));
        assert!(!l.contains_key(LABEL_REGION_BETA));
    }

    #[test]
    fn additional_labels_are_filtered_and_never_overwrite() {
        let mut n = uninitialized_node();
        n.metadata.labels = Some(BTreeMap::from([("team".to_string(), "a".to_string())]));
        let extra = BTreeMap::from([
            ("team".to_string(), "b".to_string()),
            ("cloud.example.com/pool".to_string(), "p1".to_string()),
            ("node.kubernetes.io/evil".to_string(), "x".to_string()),
            ("k8s.io/evil".to_string(), "x".to_string()),
        ]);
        merge_additional_labels(&mut n, &extra);
        let l = labels(&n);
        assert_eq!(l["team"], "a");
        assert_eq!(l["cloud.example.com/pool"], "p1");
        assert_eq!(l.len(), 2);
    }

    #[test]
    fn every_uninitialized_taint_is_removed_and_others_kept() {
        let mut n = uninitialized_node();
        remove_uninitialized_taint(&mut n);
        let taints = n.spec.unwrap().taints.unwrap();
        assert_eq!(taints, vec![taint("other", "NoExecute")]);
    }

    #[test]
    fn modifiers_are_idempotent_and_validate_the_node_ip() {
        let md = InstanceMetadata {
            provider_id: "fake://n1".into(),
            instance_type: "t".into(),
            node_addresses: vec![NodeAddress {
                type_: "InternalIP".into(),
                address: "10.0.0.1".into(),
            }],
            zone: "z".into(),
            region: "r".into(),
            additional_labels: BTreeMap::from([("x.io/y".to_string(), "v".to_string())]),
        };
        let mut n = uninitialized_node();
        let mods = NodeModifiers::new(&n, md.clone()).unwrap();
        mods.apply(&mut n);
        let once = n.clone();
        mods.apply(&mut n);
        assert_eq!(once, n);
        assert_eq!(labels(&n).len(), 7);

        let mut bad = uninitialized_node();
        bad.metadata.annotations = Some(BTreeMap::from([(
            super::super::PROVIDED_NODE_IP_ANNOTATION.to_string(),
            "10.9.9.9".to_string(),
        )]));
        assert!(NodeModifiers::new(&bad, md).is_err());
    }
}
