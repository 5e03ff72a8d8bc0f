//! Server-side printing: the `meta.k8s.io/v1` Table that kubectl asks for (`Accept: ...;as=Table`)
//! on get, list and watch, with the columns kube-apiserver's printers give the served types (Node
//! STATUS/ROLES/VERSION, Service TYPE/CLUSTER-IP/EXTERNAL-IP/PORT(S), ...) and `Name`/`Age` for the
//! rest. Rows carry the object's metadata as PartialObjectMetadata, as with `includeObject=Metadata`.

use serde_json::{Value, json};

use crate::crd::columns::{self, human_duration};
use crate::types::Served;

/// Whether the Accept header asks for a Table.
pub fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

fn col(name: &str, ty: &str, priority: u8) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": priority})
}

fn columns(rt: &Served) -> Vec<Value> {
    if let Served::Custom(c) = rt {
        return columns::definitions(&c.columns);
    }
    let s = |n: &str| col(n, "string", 0);
    let wide = |n: &str| col(n, "string", 1);
    match (rt.group(), rt.kind()) {
        ("", "Node") => vec![
            s("Name"),
            s("Status"),
            s("Roles"),
            s("Age"),
            s("Version"),
            wide("Internal-IP"),
            wide("External-IP"),
            wide("OS-Image"),
            wide("Kernel-Version"),
            wide("Container-Runtime"),
        ],
        ("", "Service") => vec![
            s("Name"),
            s("Type"),
            s("Cluster-IP"),
            s("External-IP"),
            s("Port(s)"),
            s("Age"),
            wide("Selector"),
        ],
        ("", "Namespace") => vec![s("Name"), s("Status"), s("Age")],
        ("", "ConfigMap") => vec![s("Name"), col("Data", "integer", 0), s("Age")],
        ("coordination.k8s.io", "Lease") => vec![s("Name"), s("Holder"), s("Age")],
        // The default table convertor, which CRDs get.
        ("apiextensions.k8s.io", "CustomResourceDefinition") => vec![
            s("Name"),
            json!({"name": "Created At", "type": "date", "format": "", "description": "", "priority": 0}),
        ],
        _ => vec![s("Name"), s("Age")],
    }
}

fn age(obj: &Value) -> String {
    let created = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    match created {
        Some(t) => human_duration(jiff::Timestamp::now().as_second() - t.as_second()),
        None => "<unknown>".into(),
    }
}

fn text<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn or_none(s: String) -> String {
    if s.is_empty() { "<none>".into() } else { s }
}

fn node_cells(obj: &Value) -> Vec<Value> {
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
    ]
}

fn service_cells(obj: &Value) -> Vec<Value> {
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
    let mut external: Vec<String> = obj
        .pointer("/spec/externalIPs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
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
    vec![
        ty.into(),
        or_none(text(obj, "/spec/clusterIP").into()).into(),
        external.into(),
        or_none(ports.join(",")).into(),
        age(obj).into(),
        or_none(selector.join(",")).into(),
    ]
}

fn cells(rt: &Served, obj: &Value) -> Vec<Value> {
    let mut out = vec![Value::from(text(obj, "/metadata/name"))];
    if let Served::Custom(c) = rt {
        out.extend(columns::cells(&c.columns, obj));
        return out;
    }
    out.extend(match (rt.group(), rt.kind()) {
        ("", "Node") => node_cells(obj),
        ("", "Service") => service_cells(obj),
        ("", "Namespace") => vec![text(obj, "/status/phase").into(), age(obj).into()],
        ("", "ConfigMap") => {
            let n = ["data", "binaryData"]
                .iter()
                .filter_map(|k| obj.get(*k).and_then(Value::as_object))
                .map(|m| m.len())
                .sum::<usize>();
            vec![n.into(), age(obj).into()]
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            vec![text(obj, "/metadata/creationTimestamp").into()]
        }
        ("coordination.k8s.io", "Lease") => {
            vec![text(obj, "/spec/holderIdentity").into(), age(obj).into()]
        }
        _ => vec![age(obj).into()],
    });
    out
}

fn row(rt: &Served, obj: &Value) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    json!({
        "cells": cells(rt, obj),
        "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
    })
}

/// A Table of some objects, at `rv`.
pub fn of<'a>(
    rt: &Served,
    objects: impl Iterator<Item = &'a Value>,
    rv: &str,
    cont: Option<&str>,
) -> Value {
    let rows: Vec<Value> = objects.map(|o| row(rt, o)).collect();
    let mut meta = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        meta["continue"] = c.into();
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": columns(rt), "rows": rows})
}

/// A one-row Table for a single object (get, and each watch event).
pub fn single(rt: &Served, obj: &Value) -> Value {
    let rv = text(obj, "/metadata/resourceVersion").to_string();
    of(rt, std::iter::once(obj), &rv, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_and_service_rows() {
        let nodes = &Served::Builtin(
            &crate::resources::TABLE[crate::resources::lookup("", "v1", "nodes").unwrap()],
        );
        let node = json!({"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/worker": ""}}, "spec": {"unschedulable": true}, "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.33.0"}}});
        let cells = single(nodes, &node)["rows"][0]["cells"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(
            cells[..5],
            [
                json!("n"),
                json!("Ready,SchedulingDisabled"),
                json!("worker"),
                json!("<unknown>"),
                json!("v1.33.0")
            ]
        );
        let svcs = &Served::Builtin(
            &crate::resources::TABLE[crate::resources::lookup("", "v1", "services").unwrap()],
        );
        let svc = json!({"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.5", "ports": [{"port": 80, "nodePort": 31000, "protocol": "TCP"}]}, "status": {"loadBalancer": {}}});
        let cells = single(svcs, &svc)["rows"][0]["cells"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(
            cells[..5],
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
