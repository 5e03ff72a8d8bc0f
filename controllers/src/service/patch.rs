//! Writes of the service controller: the cleanup finalizer and `status.loadBalancer`, both sent
//! as two-way strategic merge patches to the `services/<name>/status` subresource, as upstream
//! (`servicehelper.PatchService`). RBAC therefore needs `patch` on `services/status`.
//!
//! The patch bodies are computed here the way `CreateTwoWayMergePatch` would for the only fields
//! we change (metadata.finalizers, a set-like list merged by value; status.loadBalancer.ingress,
//! an atomic list), so the body carries no resourceVersion and never conflicts, like upstream.

use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Service};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Map, Value, json};

use super::predicates::LOAD_BALANCER_CLEANUP_FINALIZER;
use crate::retry::is_not_found;

/// The two-way strategic merge patch turning the finalizer list `original` into `modified`, or
/// `None` when they are equal.
pub fn finalizers_patch(original: &[String], modified: &[String]) -> Option<Value> {
    if original == modified {
        return None;
    }
    let mut meta = Map::new();
    if modified.is_empty() {
        // The key disappears from the modified object: the diff deletes it.
        meta.insert("finalizers".into(), Value::Null);
    } else if original.is_empty() {
        meta.insert("finalizers".into(), json!(modified));
    } else {
        let added: Vec<&String> = modified.iter().filter(|f| !original.contains(f)).collect();
        let removed: Vec<&String> = original.iter().filter(|f| !modified.contains(f)).collect();
        meta.insert("$setElementOrder/finalizers".into(), json!(modified));
        if !added.is_empty() {
            meta.insert("finalizers".into(), json!(added));
        }
        if !removed.is_empty() {
            meta.insert("$deleteFromPrimitiveList/finalizers".into(), json!(removed));
        }
    }
    Some(json!({ "metadata": meta }))
}

fn ingress(status: &LoadBalancerStatus) -> &[LoadBalancerIngress] {
    status.ingress.as_deref().unwrap_or_default()
}

/// Whether two load-balancer statuses publish the same ingress points (upstream
/// `LoadBalancerStatusEqual`: only `ingress` is compared; unset equals empty).
pub fn ingress_equal(a: &LoadBalancerStatus, b: &LoadBalancerStatus) -> bool {
    ingress(a) == ingress(b)
}

/// The two-way strategic merge patch replacing `status.loadBalancer.ingress` (an atomic list),
/// or `None` when the ingress points are equal.
pub fn status_patch(original: &LoadBalancerStatus, modified: &LoadBalancerStatus) -> Option<Value> {
    if ingress_equal(original, modified) {
        return None;
    }
    let value = if ingress(modified).is_empty() {
        Value::Null
    } else {
        json!(ingress(modified))
    };
    Some(json!({ "status": { "loadBalancer": { "ingress": value } } }))
}

fn finalizers(svc: &Service) -> Vec<String> {
    svc.metadata.finalizers.clone().unwrap_or_default()
}

async fn patch_service_status(
    client: &kube::Client,
    svc: &Service,
    body: Value,
) -> Result<(), kube::Error> {
    let ns = svc.metadata.namespace.as_deref().unwrap_or("default");
    let name = svc.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    tracing::debug!(service = %format!("{ns}/{name}"), patch = %body, "patching service status");
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(body))
        .await
        .map(drop)
}

/// Adds the cleanup finalizer unless `svc` already has it.
pub async fn add_finalizer(client: &kube::Client, svc: &Service) -> Result<(), kube::Error> {
    let original = finalizers(svc);
    if original
        .iter()
        .any(|f| f == LOAD_BALANCER_CLEANUP_FINALIZER)
    {
        return Ok(());
    }
    let mut modified = original.clone();
    modified.push(LOAD_BALANCER_CLEANUP_FINALIZER.to_string());
    match finalizers_patch(&original, &modified) {
        Some(body) => patch_service_status(client, svc, body).await,
        None => Ok(()),
    }
}

/// Removes the cleanup finalizer if `svc` has it. A Service already gone (a sync from a cache
/// that has not seen the end of an earlier cleanup) has no finalizer left: that is success.
pub async fn remove_finalizer(client: &kube::Client, svc: &Service) -> Result<(), kube::Error> {
    let original = finalizers(svc);
    let modified: Vec<String> = original
        .iter()
        .filter(|f| *f != LOAD_BALANCER_CLEANUP_FINALIZER)
        .cloned()
        .collect();
    match finalizers_patch(&original, &modified) {
        Some(body) => match patch_service_status(client, svc, body).await {
            Err(err) if is_not_found(&err) => Ok(()),
            other => other,
        },
        None => Ok(()),
    }
}

/// Publishes `new` as the Service's `status.loadBalancer` when its ingress points changed.
pub async fn patch_lb_status(
    client: &kube::Client,
    svc: &Service,
    new: &LoadBalancerStatus,
) -> Result<(), kube::Error> {
    let default_status = LoadBalancerStatus::default();
    let previous = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .unwrap_or(&default_status);
    match status_patch(previous, new) {
        Some(body) => patch_service_status(client, svc, body).await,
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn finalizers_patch_table() {
        let f = LOAD_BALANCER_CLEANUP_FINALIZER;
        type Case = (&'static str, Vec<String>, Vec<String>, Option<Value>);
        let cases: Vec<Case> = vec![
            ("unchanged", s(&[f]), s(&[f]), None),
            (
                "add to none",
                s(&[]),
                s(&[f]),
                Some(json!({"metadata": {"finalizers": [f]}})),
            ),
            (
                "add to others",
                s(&["a"]),
                s(&["a", f]),
                Some(
                    json!({"metadata": {"$setElementOrder/finalizers": ["a", f], "finalizers": [f]}}),
                ),
            ),
            (
                "remove last",
                s(&[f]),
                s(&[]),
                Some(json!({"metadata": {"finalizers": null}})),
            ),
            (
                "remove among others",
                s(&["a", f, "b"]),
                s(&["a", "b"]),
                Some(
                    json!({"metadata": {"$setElementOrder/finalizers": ["a", "b"], "$deleteFromPrimitiveList/finalizers": [f]}}),
                ),
            ),
        ];
        for (name, original, modified, want) in cases {
            assert_eq!(finalizers_patch(&original, &modified), want, "{name}");
        }
    }

    fn status(ips: &[&str]) -> LoadBalancerStatus {
        LoadBalancerStatus {
            ingress: Some(
                ips.iter()
                    .map(|ip| LoadBalancerIngress {
                        ip: Some(ip.to_string()),
                        ..Default::default()
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn status_patch_table() {
        let none = LoadBalancerStatus::default();
        let cases: Vec<(&str, LoadBalancerStatus, LoadBalancerStatus, Option<Value>)> = vec![
            ("both empty", none.clone(), status(&[]), None),
            ("same", status(&["1.1.1.1"]), status(&["1.1.1.1"]), None),
            (
                "set",
                none.clone(),
                status(&["1.1.1.1"]),
                Some(json!({"status": {"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}]}}})),
            ),
            (
                "replace whole list",
                status(&["1.1.1.1", "2.2.2.2"]),
                status(&["2.2.2.2"]),
                Some(json!({"status": {"loadBalancer": {"ingress": [{"ip": "2.2.2.2"}]}}})),
            ),
            (
                "clear",
                status(&["1.1.1.1"]),
                none,
                Some(json!({"status": {"loadBalancer": {"ingress": null}}})),
            ),
        ];
        for (name, original, modified, want) in cases {
            assert_eq!(status_patch(&original, &modified), want, "{name}");
        }
    }
}
