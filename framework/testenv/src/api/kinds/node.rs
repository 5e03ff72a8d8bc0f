//! Node (`v1`, cluster-scoped, with `/status`): the not-ready taint and zero-valued status a
//! new Node gets (TaintNodesByCondition), taint validation, `podCIDR`/`podCIDRs` kept as one
//! field, providerID and podCIDRs immutable once set, and kubectl's columns.

use k8s_openapi::api::core::v1 as openapi;
use k8s_pb::api::core::v1 as pb;
use serde_json::{Value, json};

use crate::api::cluster::Cluster;
use crate::api::kind::{
    Admission, Column, Kind, Lifecycle, ListStrategy, NameRule, Names, Printer, Protobuf, Rest,
    Shape, Type, untrack_unsent,
};
use crate::api::printing::{age, or_none, row, text};
use crate::api::status::{ApiError, Cause, go_quote};
use crate::api::validation::{VALUE_MSG, is_name_part, qualified_name, string_list};

/// Node.
pub const KIND: Kind = Kind {
    ty: Type::of::<openapi::Node>(),
    names: Names {
        singular: "node",
        short: &["no"],
        categories: &[],
    },
    rest: Rest {
        status: true,
        ..Rest::PLAIN
    },
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::Subdomain,
    field_selectors: &[("spec.unschedulable", "spec.unschedulable")],
    patch_lists: &[
        ("status.conditions", ListStrategy::MergeByKey("type")),
        ("status.addresses", ListStrategy::MergeByKey("type")),
        ("status.images", ListStrategy::MergeByKey("names")),
        ("spec.podCIDRs", ListStrategy::MergeScalars),
    ],
    admission: Admission {
        validate: Some(validate),
        admit: Some(admit),
        untracked: Some(untracked),
        ..Admission::NONE
    },
    printer: Printer {
        columns: &[
            Column::text("Name"),
            Column::text("Status"),
            Column::text("Roles"),
            Column::text("Age"),
            Column::text("Version"),
            Column::wide("Internal-IP"),
            Column::wide("External-IP"),
            Column::wide("OS-Image"),
            Column::wide("Kernel-Version"),
            Column::wide("Container-Runtime"),
        ],
        cells,
    },
    protobuf: Protobuf::of::<pb::Node, pb::NodeList>(),
    apply: Shape {
        maps: &["status.capacity", "status.allocatable"],
        value_structs: &[
            "status.daemonEndpoints",
            "status.daemonEndpoints.kubeletEndpoint",
            "status.nodeInfo",
        ],
        ..Shape::NONE
    },
};

/// Create: the not-ready taint and the zero-valued status. Update: the conversions, then
/// upstream's `ValidateNodeUpdate`.
fn admit(obj: &mut Value, old: Option<&Value>, _: &Cluster<'_>) -> Result<(), ApiError> {
    match old {
        None => {
            default_node(obj);
            Ok(())
        }
        Some(old) => {
            zero_condition_times(obj);
            sync_pod_cidrs(obj);
            validate_node_update(old, obj)
        }
    }
}

/// The not-ready taint is TaintNodesByCondition's, not the writer's.
fn untracked(sent: &Value, view: &mut Value) {
    untrack_unsent(sent, view, &["/spec/taints"]);
}

/// NodeCondition's times are Go structs, so upstream serializes unset ones as `null` rather than
/// omitting them (see node-status-patch-condition.txt); do the same.
fn zero_condition_times(obj: &mut Value) {
    if let Some(conds) = obj
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in conds.iter_mut().filter_map(Value::as_object_mut) {
            for k in ["lastHeartbeatTime", "lastTransitionTime"] {
                c.entry(k).or_insert(Value::Null);
            }
        }
    }
}

/// `spec.podCIDR` and `spec.podCIDRs` are one field upstream (v1 <-> internal conversion): a lone
/// podCIDR becomes `podCIDRs: [it]`, and podCIDR always mirrors `podCIDRs[0]`.
fn sync_pod_cidrs(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let single = spec
        .get("podCIDR")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let list = string_list(spec.get("podCIDRs"));
    if list.is_empty() && !single.is_empty() {
        spec.insert("podCIDRs".into(), json!([single]));
    } else if let Some(first) = list.first() {
        spec.insert("podCIDR".into(), first.clone().into());
    }
}

/// Upstream `ValidateNodeUpdate`: providerID and podCIDRs may only go from unset to set.
fn validate_node_update(old: &Value, new: &Value) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    let old_cidrs = string_list(old.pointer("/spec/podCIDRs"));
    if !old_cidrs.is_empty() && old_cidrs != string_list(new.pointer("/spec/podCIDRs")) {
        causes.push(Cause::forbidden(
            "spec.podCIDRs",
            "node updates may not change podCIDR except from \"\" to valid",
        ));
    }
    let old_id = text(old, "/spec/providerID");
    if !old_id.is_empty() && old_id != text(new, "/spec/providerID") {
        causes.push(Cause::forbidden(
            "spec.providerID",
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        "",
        "Node",
        text(old, "/metadata/name"),
        causes,
    ))
}

fn default_node(obj: &mut Value) {
    zero_condition_times(obj);
    sync_pod_cidrs(obj);
    const NOT_READY: &str = "node.kubernetes.io/not-ready";
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    let spec = &mut obj["spec"];
    if !spec.get("taints").is_some_and(Value::is_array) {
        spec["taints"] = json!([]);
    }
    if let Some(taints) = spec["taints"].as_array_mut()
        && !taints
            .iter()
            .any(|t| t["key"] == NOT_READY && t["effect"] == "NoSchedule")
    {
        taints.push(json!({"key": NOT_READY, "effect": "NoSchedule"}));
    }
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let status = &mut obj["status"];
    if status.get("daemonEndpoints").is_none() {
        status["daemonEndpoints"] = json!({"kubeletEndpoint": {"Port": 0}});
    }
    if status.get("nodeInfo").is_none() {
        status["nodeInfo"] = json!({
            "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "",
            "containerRuntimeVersion": "", "kubeletVersion": "", "kubeProxyVersion": "",
            "operatingSystem": "", "architecture": ""
        });
    }
}

const EFFECTS: &[&str] = &["NoExecute", "NoSchedule", "PreferNoSchedule"];

/// `spec.taints`: effect, key, value, unique by key and effect.
fn validate(obj: &Value, _old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(taints) = obj.pointer("/spec/taints").and_then(Value::as_array) else {
        return causes;
    };
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, t) in taints.iter().enumerate() {
        let key = t.get("key").and_then(Value::as_str).unwrap_or("");
        let value = t.get("value").and_then(Value::as_str).unwrap_or("");
        let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
        causes.extend(qualified_name(&format!("spec.taints[{i}].key"), key));
        if !value.is_empty() && (!is_name_part(value) || value.len() > 63) {
            causes.push(Cause::invalid(
                format!("spec.taints[{i}].value"),
                &go_quote(value),
                VALUE_MSG,
            ));
        }
        if effect.is_empty() {
            causes.push(Cause::required(format!("spec.taints[{i}].effect"), ""));
        } else if !EFFECTS.contains(&effect) {
            causes.push(Cause::not_supported(
                format!("spec.taints[{i}].effect"),
                &go_quote(effect),
                EFFECTS,
            ));
        }
        if seen.contains(&(key, effect)) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                message: format!(
                    "Duplicate value: core.Taint{{Key:{}, Value:{}, Effect:{}, TimeAdded:<nil>}}: taints must be unique by key and effect pair",
                    go_quote(key),
                    go_quote(value),
                    go_quote(effect)
                ),
                field: format!("spec.taints[{i}]"),
            });
        }
        seen.push((key, effect));
    }
    causes
}

fn cells(obj: &Value) -> Vec<Value> {
    let conds = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut status = match conds
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| text(c, "/status"))
    {
        Some("True") => "Ready".to_string(),
        Some("False") => "NotReady".to_string(),
        _ => "Unknown".to_string(),
    };
    if obj.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .filter(|r| !r.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    let addr = |ty: &str| -> String {
        let list = obj
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        or_none(
            list.iter()
                .filter(|a| a["type"] == ty)
                .map(|a| text(a, "/address").to_string())
                .collect::<Vec<_>>()
                .join(","),
        )
    };
    row(
        obj,
        vec![
            status.into(),
            or_none(roles.join(",")).into(),
            age(obj).into(),
            text(obj, "/status/nodeInfo/kubeletVersion").into(),
            addr("InternalIP").into(),
            addr("ExternalIP").into(),
            or_none(text(obj, "/status/nodeInfo/osImage").into())
                .replace("<none>", "<unknown>")
                .into(),
            or_none(text(obj, "/status/nodeInfo/kernelVersion").into())
                .replace("<none>", "<unknown>")
                .into(),
            or_none(text(obj, "/status/nodeInfo/containerRuntimeVersion").into())
                .replace("<none>", "<unknown>")
                .into(),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taint_rules() {
        let node = json!({"spec": {"taints": [
            {"key": "a", "effect": "NoSchedule"},
            {"key": "a", "effect": "NoSchedule"},
            {"key": "b", "effect": "Sometimes"},
            {"key": "c"}
        ]}});
        let got: Vec<(String, &str)> = validate(&node, None)
            .into_iter()
            .map(|c| (c.field, c.reason))
            .collect();
        assert_eq!(
            got,
            [
                ("spec.taints[1]".to_string(), "FieldValueDuplicate"),
                ("spec.taints[2].effect".into(), "FieldValueNotSupported"),
                ("spec.taints[3].effect".into(), "FieldValueRequired"),
            ]
        );
    }

    #[test]
    fn row_shows_status_roles_and_version() {
        let node = json!({"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/worker": ""}}, "spec": {"unschedulable": true}, "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.33.0"}}});
        assert_eq!(
            cells(&node)[..5],
            [
                json!("n"),
                json!("Ready,SchedulingDisabled"),
                json!("worker"),
                json!("<unknown>"),
                json!("v1.33.0")
            ]
        );
    }
}
