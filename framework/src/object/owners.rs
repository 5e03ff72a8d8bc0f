//! Mapping an owned object to its controlling owner's key: what
//! [`ControllerBuilder::owns`](crate::builder::ControllerBuilder::owns) enqueues (controller-runtime's
//! `EnqueueRequestForOwner` with `OnlyControllerOwner`, kube-runtime's `trigger_owners`).

use kube::Resource;

use crate::informer::{InformerResource, ObjectKey, ScopedApi};

/// The key of `obj`'s controlling owner if that owner is a `K`: the one `ownerReferences` entry
/// with `controller: true`, matched on group and kind (any version, as controller-runtime
/// matches). A namespaced owner lives in the owned object's namespace (owner references cannot
/// cross namespaces); a cluster-scoped one has none.
pub fn controller_owner<K: InformerResource>(obj: &impl Resource) -> Option<ObjectKey> {
    controller_owner_of(
        obj,
        &K::group(&()),
        &K::kind(&()),
        <K::Scope as ScopedApi>::NAMESPACED,
    )
}

/// [`controller_owner`] for an owner kind named at run time: its `group` and `kind`, and
/// whether it is `namespaced`.
pub fn controller_owner_of(
    obj: &impl Resource,
    group: &str,
    kind: &str,
    namespaced: bool,
) -> Option<ObjectKey> {
    let owner = obj
        .meta()
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))?;
    let owner_group = owner.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    if owner.kind != kind || owner_group != group {
        return None;
    }
    let namespace = if namespaced {
        obj.meta().namespace.clone().filter(|ns| !ns.is_empty())
    } else {
        None
    };
    Some(ObjectKey {
        namespace,
        name: owner.name.clone(),
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
    use serde_json::json;

    use super::*;

    fn owned(refs: serde_json::Value) -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns", "ownerReferences": refs}
        }))
        .unwrap()
    }

    fn owner_ref(api_version: &str, kind: &str, controller: bool) -> serde_json::Value {
        json!({"apiVersion": api_version, "kind": kind, "name": "o", "uid": "u", "controller": controller})
    }

    #[test]
    fn only_the_controlling_owner_of_the_right_kind() {
        let cm = owned(json!([owner_ref("v1", "Service", true)]));
        assert_eq!(
            controller_owner::<Service>(&cm),
            Some(ObjectKey::namespaced("ns", "o"))
        );
        assert_eq!(controller_owner::<Node>(&cm), None, "other kind");
        let not_controller = owned(json!([owner_ref("v1", "Service", false)]));
        assert_eq!(controller_owner::<Service>(&not_controller), None);
        // Group must match, version need not.
        let apps = owned(json!([owner_ref("apps/v1beta2", "Deployment", true)]));
        assert_eq!(
            controller_owner::<Deployment>(&apps),
            Some(ObjectKey::namespaced("ns", "o"))
        );
        let wrong_group = owned(json!([owner_ref("example.com/v1", "Deployment", true)]));
        assert_eq!(controller_owner::<Deployment>(&wrong_group), None);
        let cluster_owner = owned(json!([owner_ref("v1", "Node", true)]));
        assert_eq!(
            controller_owner::<Node>(&cluster_owner),
            Some(ObjectKey::cluster("o"))
        );
    }
}
