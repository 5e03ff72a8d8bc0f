//! The initialization write as a JSON patch that depends only on what it changes: it tests the
//! taints it replaces and adds the provider ID and the labels it sets, with no resourceVersion
//! (unless the Node has no labels at all).
//!
//! Upstream (and this crate before) PUTs the whole Node read from the cache. Every kubelet
//! heartbeat between that read and the write bumps the resourceVersion, so the PUT conflicts
//! (409) and is retried, often against a cache that has not caught up yet. The patch below cannot
//! conflict with a status update or with another writer's labels: it fails (422, "test failed")
//! only when the taints themselves changed, and is then retried over a fresh read.

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

/// The ops that turn `current` into `new` for the fields the initialization sets: `spec.taints`
/// (guarded by a `test` of the current list), `spec.providerID` and `metadata.labels` (added or
/// overwritten key by key, so other writers' labels stay). Empty when nothing differs.
pub fn init_patch(current: &Node, new: &Node) -> Vec<Value> {
    let mut ops = Vec::new();
    let taints = |n: &Node| n.spec.as_ref().and_then(|s| s.taints.clone());
    let (old_taints, new_taints) = (taints(current), taints(new));
    if old_taints != new_taints {
        if let Some(old) = &old_taints {
            ops.push(json!({"op": "test", "path": "/spec/taints", "value": old}));
        }
        match new_taints.filter(|t| !t.is_empty()) {
            Some(t) => ops.push(json!({"op": "add", "path": "/spec/taints", "value": t})),
            None if old_taints.is_some() => {
                ops.push(json!({"op": "remove", "path": "/spec/taints"}))
            }
            None => {}
        }
    }
    let provider_id = |n: &Node| n.spec.as_ref().and_then(|s| s.provider_id.clone());
    if provider_id(current) != provider_id(new)
        && let Some(id) = provider_id(new)
    {
        if current.spec.is_none() {
            ops.push(json!({"op": "add", "path": "/spec", "value": {}}));
        }
        ops.push(json!({"op": "add", "path": "/spec/providerID", "value": id}));
    }
    let new_labels = new.metadata.labels.clone().unwrap_or_default();
    match &current.metadata.labels {
        None if !new_labels.is_empty() => {
            // No map to add keys to, so the whole map goes in; nothing else to test, so the
            // resourceVersion guards it (kubelet always registers labels: this is rare).
            let rv = current.metadata.resource_version.clone();
            ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
            ops.push(json!({"op": "add", "path": "/metadata/labels", "value": new_labels}));
        }
        None => {}
        Some(old) => {
            for (key, value) in new_labels.iter().filter(|(k, v)| old.get(*k) != Some(*v)) {
                let path = format!("/metadata/labels/{}", escape(key));
                ops.push(json!({"op": "add", "path": path, "value": value}));
            }
        }
    }
    ops
}

/// A JSON pointer token (RFC 6901): `~` as `~0`, `/` as `~1`.
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(v: Value) -> Node {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn tests_the_taints_and_adds_only_what_changed() {
        let taint = json!({"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"});
        let current = node(json!({
            "metadata": {"name": "n", "labels": {"keep": "x", "kubernetes.io/os": "linux"}},
            "spec": {"taints": [taint]}
        }));
        let new = node(json!({
            "metadata": {"name": "n", "labels": {"keep": "x", "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "a"}},
            "spec": {"providerID": "fake://n"}
        }));
        assert_eq!(
            init_patch(&current, &new),
            vec![
                json!({"op": "test", "path": "/spec/taints", "value": [taint]}),
                json!({"op": "remove", "path": "/spec/taints"}),
                json!({"op": "add", "path": "/spec/providerID", "value": "fake://n"}),
                json!({"op": "add", "path": "/metadata/labels/topology.kubernetes.io~1zone", "value": "a"}),
            ]
        );
        assert!(init_patch(&new, &new).is_empty());
    }

    #[test]
    fn a_node_without_labels_gets_the_whole_map() {
        let current = node(json!({"metadata": {"name": "n", "resourceVersion": "7"}}));
        let new = node(json!({"metadata": {"name": "n", "labels": {"a~b": "1"}}}));
        assert_eq!(
            init_patch(&current, &new),
            vec![
                json!({"op": "test", "path": "/metadata/resourceVersion", "value": "7"}),
                json!({"op": "add", "path": "/metadata/labels", "value": {"a~b": "1"}}),
            ]
        );
        assert_eq!(escape("a~b/c"), "a~0b~1c");
    }
}
