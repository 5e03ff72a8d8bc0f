//! Pod (`v1`, namespaced, with `/status`): the v1 defaults, the create-time admission plugins
//! and initial status (`defaults`), kubectl's columns, and the generation the server keeps
//! (since 1.33).

mod defaults;

use k8s_openapi::api::core::v1 as openapi;
use k8s_pb::api::core::v1 as pb;
use serde_json::Value;

use crate::api::kind::{
    Admission, Column, Kind, Lifecycle, ListStrategy, NameRule, Names, Printer, Protobuf, Rest,
    Shape, Type,
};
use crate::api::printing::{age, arr, or_none, row, text};

/// Pod.
pub const KIND: Kind = Kind {
    ty: Type::of::<openapi::Pod>(),
    names: Names {
        singular: "pod",
        short: &["po"],
        categories: &["all"],
    },
    rest: Rest {
        status: true,
        generation: true,
        ..Rest::PLAIN
    },
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::Subdomain,
    field_selectors: &[
        ("spec.nodeName", "spec.nodeName"),
        ("spec.restartPolicy", "spec.restartPolicy"),
        ("spec.schedulerName", "spec.schedulerName"),
        ("spec.serviceAccountName", "spec.serviceAccountName"),
        ("status.phase", "status.phase"),
        ("status.podIP", "status.podIP"),
        ("status.nominatedNodeName", "status.nominatedNodeName"),
    ],
    patch_lists: &[
        ("spec.containers", ListStrategy::MergeByKey("name")),
        ("spec.initContainers", ListStrategy::MergeByKey("name")),
        ("spec.volumes", ListStrategy::MergeByKey("name")),
        ("spec.tolerations", ListStrategy::MergeByKey("key")),
        ("status.conditions", ListStrategy::MergeByKey("type")),
    ],
    admission: Admission {
        defaults: Some(defaults::default),
        on_create: Some(defaults::admit_create),
        untracked: Some(defaults::untrack),
        ..Admission::NONE
    },
    printer: Printer {
        columns: &[
            Column::text("Name"),
            Column::text("Ready"),
            Column::text("Status"),
            Column::text("Restarts"),
            Column::text("Age"),
            Column::wide("IP"),
            Column::wide("Node"),
            Column::wide("Nominated Node"),
            Column::wide("Readiness Gates"),
        ],
        cells,
    },
    protobuf: Protobuf::of::<pb::Pod, pb::PodList>(),
    apply: Shape {
        list_keys: &[
            ("spec.containers.ports", &["containerPort", "protocol"]),
            ("spec.initContainers.ports", &["containerPort", "protocol"]),
        ],
        atomic: &["spec.nodeSelector"],
        ..Shape::NONE
    },
};

/// upstream `printPod`, for the states a test creates: ready/total containers, the phase (or
/// the status reason), restarts, and the wide columns.
fn cells(obj: &Value) -> Vec<Value> {
    let containers = arr(obj.get("spec").unwrap_or(&Value::Null), "containers").len();
    let statuses = obj
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let ready = statuses.iter().filter(|c| c["ready"] == true).count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
        .sum();
    let mut status = match text(obj, "/status/reason") {
        "" => text(obj, "/status/phase").to_string(),
        reason => reason.to_string(),
    };
    if obj.pointer("/metadata/deletionTimestamp").is_some() {
        status = "Terminating".into();
    }
    let gates = arr(obj.get("spec").unwrap_or(&Value::Null), "readinessGates").len();
    row(
        obj,
        vec![
            format!("{ready}/{containers}").into(),
            status.into(),
            restarts.to_string().into(),
            age(obj).into(),
            or_none(text(obj, "/status/podIP").to_string()).into(),
            or_none(text(obj, "/spec/nodeName").to_string()).into(),
            or_none(text(obj, "/status/nominatedNodeName").to_string()).into(),
            if gates == 0 {
                "<none>".into()
            } else {
                format!("0/{gates}").into()
            },
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn row_counts_ready_containers_and_restarts() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIP": "10.1.0.4", "containerStatuses": [{"ready": true, "restartCount": 2}, {"ready": false, "restartCount": 1}]}});
        let c = cells(&pod);
        assert_eq!(c[1..4], [json!("1/2"), json!("Running"), json!("3")]);
        assert_eq!(c[5..7], [json!("10.1.0.4"), json!("n1")]);
        assert_eq!(c.len(), KIND.printer.columns.len());
    }
}
