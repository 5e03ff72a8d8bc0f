//! Namespace (`v1`, cluster-scoped, with `/status`): the `kubernetes` finalizer, the Active
//! phase and the `kubernetes.io/metadata.name` label a new one gets, RFC 1123 label names, and
//! what deleting one sets off (its content deleted; the system namespaces cannot be deleted:
//! `handlers::delete`).

use k8s_openapi::api::core::v1 as openapi;
use k8s_pb::api::core::v1 as pb;
use serde_json::{Value, json};

use crate::api::cluster::Cluster;
use crate::api::kind::{
    Admission, Column, Kind, Lifecycle, ListStrategy, NameRule, Names, Printer, Protobuf, Rest,
    Shape, Type, untrack_unsent,
};
use crate::api::meta::meta_mut;
use crate::api::printing::{age, row, text};
use crate::api::status::ApiError;

/// Namespace.
pub const KIND: Kind = Kind {
    ty: Type::of::<openapi::Namespace>(),
    names: Names {
        singular: "namespace",
        short: &["ns"],
        categories: &[],
    },
    rest: Rest {
        status: true,
        // No deletecollection, as upstream.
        verbs: &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
        ..Rest::PLAIN
    },
    lifecycle: Lifecycle::Namespace,
    name_rule: NameRule::Label,
    field_selectors: &[("status.phase", "status.phase")],
    patch_lists: &[("status.conditions", ListStrategy::MergeByKey("type"))],
    admission: Admission {
        admit: Some(admit),
        untracked: Some(untracked),
        ..Admission::NONE
    },
    printer: Printer {
        columns: &[
            Column::text("Name"),
            Column::text("Status"),
            Column::text("Age"),
        ],
        cells,
    },
    protobuf: Protobuf::of::<pb::Namespace, pb::NamespaceList>(),
    apply: Shape::NONE,
};

/// The namespaces kube-apiserver refuses to delete.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// The namespace strategy's defaults, on create.
fn admit(obj: &mut Value, old: Option<&Value>, _: &Cluster<'_>) -> Result<(), ApiError> {
    if old.is_none() {
        let name = text(obj, "/metadata/name").to_string();
        default_namespace(obj, &name);
    }
    Ok(())
}

/// The finalizer is set by the namespace strategy after the field manager ran.
fn untracked(sent: &Value, view: &mut Value) {
    untrack_unsent(sent, view, &["/spec/finalizers"]);
}

fn cells(obj: &Value) -> Vec<Value> {
    row(
        obj,
        vec![text(obj, "/status/phase").into(), age(obj).into()],
    )
}

fn default_namespace(obj: &mut Value, name: &str) {
    let meta = meta_mut(obj);
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if let Some(l) = labels.as_object_mut() {
        l.insert("kubernetes.io/metadata.name".into(), name.into());
    }
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    if obj["spec"].get("finalizers").is_none() {
        obj["spec"]["finalizers"] = json!(["kubernetes"]);
    }
    obj["status"] = json!({"phase": "Active"});
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_namespace_gets_its_label_finalizer_and_phase() {
        let mut ns = json!({"metadata": {"name": "team"}});
        default_namespace(&mut ns, "team");
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "team"
        );
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(ns["status"]["phase"], "Active");
        assert_eq!(cells(&ns)[..2], [json!("team"), json!("Active")]);
    }
}
