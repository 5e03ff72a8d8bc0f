//! Taint writes as upstream's `AddOrUpdateTaintOnNode` / `RemoveTaintOffNode` do them: GET the Node
//! (first from the API server's cache, then fresh), compute the new taint list, and send a
//! strategic-merge patch that carries the observed `resourceVersion`. `spec.taints` has no merge
//! key, so the list is replaced whole and the resourceVersion turns a concurrent change into a
//! 409 that is retried (5 attempts, 100 ms + jitter).

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::Api;
use serde_json::json;

use crate::retry::patch_node_on_conflict;

/// Taint the lifecycle controller puts on Nodes whose instance is shut down, so nothing new is
/// scheduled there until it is Ready again.
pub const SHUTDOWN_TAINT_KEY: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// The shutdown taint exactly as upstream applies it: `NoSchedule`, no value.
pub fn shutdown_taint() -> Taint {
    Taint {
        key: SHUTDOWN_TAINT_KEY.to_string(),
        effect: "NoSchedule".to_string(),
        ..Default::default()
    }
}

/// Whether two taints are "the same taint" for add/remove purposes (same key and effect).
pub fn taint_matches(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

fn taints_of(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[])
}

/// The taint list with `taint` added, or replacing a same key+effect taint that differs (e.g. in
/// value); `None` when an identical taint is already there.
pub fn with_taint(taints: &[Taint], taint: &Taint) -> Option<Vec<Taint>> {
    if taints.iter().any(|t| t == taint) {
        return None;
    }
    let mut out = Vec::with_capacity(taints.len() + 1);
    let mut replaced = false;
    for t in taints {
        if taint_matches(t, taint) {
            if !replaced {
                out.push(taint.clone());
                replaced = true;
            }
        } else {
            out.push(t.clone());
        }
    }
    if !replaced {
        out.push(taint.clone());
    }
    Some(out)
}

/// The taint list without any same key+effect taint; `None` when there is none to remove.
pub fn without_taint(taints: &[Taint], taint: &Taint) -> Option<Vec<Taint>> {
    if !taints.iter().any(|t| taint_matches(t, taint)) {
        return None;
    }
    Some(
        taints
            .iter()
            .filter(|t| !taint_matches(t, taint))
            .cloned()
            .collect(),
    )
}

/// The patch that sets `spec.taints` to `taints` only if the Node is still at
/// `resource_version` (an empty list deletes the field, as Go's two-way merge does).
pub fn taints_patch(resource_version: &str, taints: &[Taint]) -> serde_json::Value {
    let taints = if taints.is_empty() {
        serde_json::Value::Null
    } else {
        json!(taints)
    };
    json!({
        "metadata": { "resourceVersion": resource_version },
        "spec": { "taints": taints },
    })
}

/// GETs the Node (cache first, then fresh on retries), applies `change` to its taints and, if it
/// returns a new list, patches it with the observed resourceVersion; conflicts are retried.
async fn change_taints(
    api: &Api<Node>,
    name: &str,
    change: impl Fn(&[Taint]) -> Option<Vec<Taint>>,
) -> Result<(), kube::Error> {
    patch_node_on_conflict(api, name, |node| {
        let new_taints = change(taints_of(node))?;
        let rv = node
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or_default();
        Some(taints_patch(rv, &new_taints))
    })
    .await
}

/// Adds `taint` to the Node (replacing a same key+effect taint that differs); no PATCH when an
/// identical taint exists, but always one GET, as upstream.
pub async fn add_or_update_taint_on_node(
    api: &Api<Node>,
    name: &str,
    taint: &Taint,
) -> Result<(), kube::Error> {
    change_taints(api, name, |taints| with_taint(taints, taint)).await
}

/// Removes every same key+effect taint from the Node; makes no API call at all when the cached
/// Node shows no such taint.
pub async fn remove_taint_off_node(
    api: &Api<Node>,
    cached: &Node,
    taint: &Taint,
) -> Result<(), kube::Error> {
    if !taints_of(cached).iter().any(|t| taint_matches(t, taint)) {
        return Ok(());
    }
    let name = cached.metadata.name.as_deref().unwrap_or_default();
    change_taints(api, name, |taints| without_taint(taints, taint)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(String::from),
            effect: effect.into(),
            ..Default::default()
        }
    }

    #[test]
    fn adding_is_a_no_op_when_an_identical_taint_exists() {
        let taints = vec![t("a", None, "NoExecute"), shutdown_taint()];
        assert_eq!(with_taint(&taints, &shutdown_taint()), None);
    }

    #[test]
    fn adding_appends_or_replaces_same_key_and_effect() {
        let taints = vec![t("a", None, "NoExecute")];
        assert_eq!(
            with_taint(&taints, &shutdown_taint()),
            Some(vec![t("a", None, "NoExecute"), shutdown_taint()])
        );
        let taints = vec![
            t(SHUTDOWN_TAINT_KEY, Some("x"), "NoSchedule"),
            t("a", None, "NoExecute"),
            t(SHUTDOWN_TAINT_KEY, None, "NoExecute"),
        ];
        assert_eq!(
            with_taint(&taints, &shutdown_taint()),
            Some(vec![
                shutdown_taint(),
                t("a", None, "NoExecute"),
                t(SHUTDOWN_TAINT_KEY, None, "NoExecute"),
            ])
        );
    }

    #[test]
    fn removing_matches_key_and_effect_only() {
        let taints = vec![
            t(SHUTDOWN_TAINT_KEY, Some("v"), "NoSchedule"),
            t(SHUTDOWN_TAINT_KEY, None, "NoExecute"),
        ];
        assert_eq!(
            without_taint(&taints, &shutdown_taint()),
            Some(vec![t(SHUTDOWN_TAINT_KEY, None, "NoExecute")])
        );
        assert_eq!(
            without_taint(&[t("a", None, "NoSchedule")], &shutdown_taint()),
            None
        );
    }

    #[test]
    fn patch_carries_the_resource_version_and_replaces_the_list() {
        assert_eq!(
            taints_patch("42", &[shutdown_taint()]),
            json!({
                "metadata": {"resourceVersion": "42"},
                "spec": {"taints": [{"key": SHUTDOWN_TAINT_KEY, "effect": "NoSchedule"}]}
            })
        );
        assert_eq!(
            taints_patch("7", &[]),
            json!({"metadata": {"resourceVersion": "7"}, "spec": {"taints": null}})
        );
    }
}
