//! Service (`v1`, namespaced, with `/status`): RFC 1035 names, defaulting, address allocation
//! and validation in one step against the cluster's ranges and allocated addresses (`admit`),
//! kubectl's columns, and the fields a creator does not own because they are allocated after
//! the field manager ran.

mod admit;

use k8s_openapi::api::core::v1 as openapi;
use k8s_pb::api::core::v1 as pb;
use serde_json::Value;

use crate::api::kind::{
    Admission, Column, Kind, Lifecycle, ListStrategy, NameRule, Names, Printer, Protobuf, Rest,
    Shape, Type,
};
use crate::api::printing::{age, or_none, row, text};
use crate::api::validation::string_list;

/// Service.
pub const KIND: Kind = Kind {
    ty: Type::of::<openapi::Service>(),
    names: Names {
        singular: "service",
        short: &["svc"],
        categories: &["all"],
    },
    rest: Rest {
        status: true,
        ..Rest::PLAIN
    },
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::Dns1035,
    field_selectors: &[
        ("spec.clusterIP", "spec.clusterIP"),
        ("spec.type", "spec.type"),
    ],
    patch_lists: &[
        ("spec.ports", ListStrategy::MergeByKey("port")),
        ("status.conditions", ListStrategy::MergeByKey("type")),
    ],
    admission: Admission {
        admit: Some(admit::admit),
        ..Admission::NONE
    },
    printer: Printer {
        columns: &[
            Column::text("Name"),
            Column::text("Type"),
            Column::text("Cluster-IP"),
            Column::text("External-IP"),
            Column::text("Port(s)"),
            Column::text("Age"),
            Column::wide("Selector"),
        ],
        cells,
    },
    protobuf: Protobuf::of::<pb::Service, pb::ServiceList>(),
    apply: Shape {
        list_keys: &[("spec.ports", &["port", "protocol"])],
        atomic: &["spec.selector"],
        value_structs: &["status.loadBalancer"],
        allocated_on_create: &[
            "spec.clusterIP",
            "spec.clusterIPs",
            "spec.ipFamilies",
            "spec.ipFamilyPolicy",
            "spec.ports.nodePort",
            "spec.healthCheckNodePort",
        ],
        ..Shape::NONE
    },
};

fn cells(obj: &Value) -> Vec<Value> {
    let ty = text(obj, "/spec/type");
    let ingress = obj
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let lb: Vec<String> = ingress
        .iter()
        .map(|i| {
            if text(i, "/ip").is_empty() {
                text(i, "/hostname").to_string()
            } else {
                text(i, "/ip").to_string()
            }
        })
        .collect();
    let mut external = string_list(obj.pointer("/spec/externalIPs"));
    let external = match ty {
        "LoadBalancer" if lb.is_empty() && external.is_empty() => "<pending>".to_string(),
        "LoadBalancer" => {
            external.extend(lb);
            external.join(",")
        }
        "ExternalName" => text(obj, "/spec/externalName").to_string(),
        _ => or_none(external.join(",")),
    };
    let ports: Vec<String> = obj
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    let port = p["port"].as_i64().unwrap_or(0);
                    let proto = text(p, "/protocol");
                    match p["nodePort"].as_i64() {
                        Some(np) if np != 0 => format!("{port}:{np}/{proto}"),
                        _ => format!("{port}/{proto}"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let selector: Vec<String> = obj
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    row(
        obj,
        vec![
            ty.into(),
            or_none(text(obj, "/spec/clusterIP").into()).into(),
            external.into(),
            or_none(ports.join(",")).into(),
            age(obj).into(),
            or_none(selector.join(",")).into(),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pending_load_balancer_row() {
        let svc = json!({"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.5", "ports": [{"port": 80, "nodePort": 31000, "protocol": "TCP"}]}, "status": {"loadBalancer": {}}});
        assert_eq!(
            cells(&svc)[..5],
            [
                json!("s"),
                json!("LoadBalancer"),
                json!("10.96.0.5"),
                json!("<pending>"),
                json!("80:31000/TCP")
            ]
        );
    }
}
