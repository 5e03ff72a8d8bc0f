//! kube-apiserver's printers for the served types: the Table columns of each (Node
//! STATUS/ROLES/VERSION, Service TYPE/CLUSTER-IP/EXTERNAL-IP/PORT(S), Event LAST SEEN/TYPE/
//! REASON/OBJECT/MESSAGE, ...), a custom resource's printer columns, and the cells of one
//! object, as `kubectl get` shows them; `Name` and `Age` for types upstream prints no more of.

use serde_json::{Value, json};

use crate::api::types::Served;
use crate::api::validation::string_list;
use crate::crd::columns::{self, human_duration};

fn col(name: &str, ty: &str, priority: u8) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": priority})
}

pub fn columns(rt: &Served) -> Vec<Value> {
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
        ("", "Secret") => vec![s("Name"), s("Type"), col("Data", "integer", 0), s("Age")],
        ("", "Endpoints") => vec![s("Name"), s("Endpoints"), s("Age")],
        ("", "Pod") => vec![
            s("Name"),
            s("Ready"),
            s("Status"),
            col("Restarts", "string", 0),
            s("Age"),
            wide("IP"),
            wide("Node"),
            wide("Nominated Node"),
            wide("Readiness Gates"),
        ],
        ("", "Event") | ("events.k8s.io", "Event") => vec![
            s("Last Seen"),
            s("Type"),
            s("Reason"),
            s("Object"),
            wide("Subobject"),
            wide("Source"),
            s("Message"),
            wide("First Seen"),
            wide("Count"),
            col("Name", "string", 1),
        ],
        ("discovery.k8s.io", "EndpointSlice") => vec![
            s("Name"),
            s("AddressType"),
            s("Ports"),
            s("Endpoints"),
            s("Age"),
        ],
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

pub fn text<'a>(obj: &'a Value, ptr: &str) -> &'a str {
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
    vec![
        ty.into(),
        or_none(text(obj, "/spec/clusterIP").into()).into(),
        external.into(),
        or_none(ports.join(",")).into(),
        age(obj).into(),
        or_none(selector.join(",")).into(),
    ]
}

pub fn cells(rt: &Served, obj: &Value) -> Vec<Value> {
    if rt.custom().is_none() && rt.kind() == "Event" {
        return event_cells(obj);
    }
    let mut out = vec![Value::from(text(obj, "/metadata/name"))];
    if let Served::Custom(c) = rt {
        out.extend(columns::cells(&c.columns, obj));
        return out;
    }
    out.extend(match (rt.group(), rt.kind()) {
        ("", "Secret") => {
            let n = obj
                .get("data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len());
            vec![text(obj, "/type").into(), n.into(), age(obj).into()]
        }
        ("", "Endpoints") => vec![endpoints(obj).into(), age(obj).into()],
        ("", "Pod") => pod_cells(obj),
        ("discovery.k8s.io", "EndpointSlice") => vec![
            text(obj, "/addressType").into(),
            slice_ports(obj).into(),
            slice_endpoints(obj).into(),
            age(obj).into(),
        ],
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

/// How long ago an RFC 3339 timestamp (or MicroTime) was, as kubectl prints it.
fn since(obj: &Value, ptr: &str) -> Option<String> {
    let t = obj
        .pointer(ptr)?
        .as_str()?
        .parse::<jiff::Timestamp>()
        .ok()?;
    Some(human_duration(
        jiff::Timestamp::now().as_second() - t.as_second(),
    ))
}

/// upstream `printEvent` (wide, as the server prints): core/v1 and events.k8s.io/v1 alike, the
/// latter's fields mapped as the internal Event has them.
fn event_cells(obj: &Value) -> Vec<Value> {
    let first_text = |ptrs: &[&str]| {
        ptrs.iter()
            .map(|p| text(obj, p))
            .find(|s| !s.is_empty())
            .unwrap_or("")
            .to_string()
    };
    let first = since(obj, "/firstTimestamp")
        .or_else(|| since(obj, "/deprecatedFirstTimestamp"))
        .or_else(|| since(obj, "/eventTime"))
        .unwrap_or_else(|| "<unknown>".into());
    let series = obj.get("series").filter(|s| s.is_object());
    let last = match series {
        Some(_) => since(obj, "/series/lastObservedTime").unwrap_or_else(|| "<unknown>".into()),
        None => since(obj, "/lastTimestamp")
            .or_else(|| since(obj, "/deprecatedLastTimestamp"))
            .unwrap_or_else(|| first.clone()),
    };
    let count = match series {
        Some(s) => s.get("count").and_then(Value::as_i64).unwrap_or(0),
        None => obj
            .get("count")
            .or_else(|| obj.get("deprecatedCount"))
            .and_then(Value::as_i64)
            .filter(|c| *c != 0)
            .unwrap_or(1),
    };
    let regarding = obj
        .get("involvedObject")
        .or_else(|| obj.get("regarding"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let kind = text(&regarding, "/kind").to_lowercase();
    let target = match text(&regarding, "/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let component = first_text(&[
        "/source/component",
        "/deprecatedSource/component",
        "/reportingComponent",
        "/reportingController",
    ]);
    let instance = first_text(&[
        "/source/host",
        "/deprecatedSource/host",
        "/reportingInstance",
    ]);
    let source = if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    };
    let message = first_text(&["/message", "/note"]);
    vec![
        last.into(),
        text(obj, "/type").into(),
        text(obj, "/reason").into(),
        target.into(),
        text(&regarding, "/fieldPath").into(),
        source.into(),
        message.trim().into(),
        first.into(),
        count.into(),
        text(obj, "/metadata/name").into(),
    ]
}

/// Up to three of `items`, then `+ N more...`, as upstream's endpoint printers cut lists.
fn first_three(items: Vec<String>, none: &str) -> String {
    match items.len() {
        0 => none.to_string(),
        n if n > 3 => format!("{} + {} more...", items[..3].join(","), n - 3),
        _ => items.join(","),
    }
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// upstream `formatEndpoints`: `ip:port` for every address and port of every subset.
fn endpoints(obj: &Value) -> String {
    let mut list = Vec::new();
    for subset in arr(obj, "subsets") {
        let ports = arr(subset, "ports");
        for addr in arr(subset, "addresses") {
            let ip = text(addr, "/ip");
            if ports.is_empty() {
                list.push(ip.to_string());
            }
            for port in ports {
                let p = port.get("port").and_then(Value::as_i64).unwrap_or(0);
                list.push(if ip.contains(':') {
                    format!("[{ip}]:{p}")
                } else {
                    format!("{ip}:{p}")
                });
            }
        }
    }
    first_three(list, "<none>")
}

fn slice_ports(obj: &Value) -> String {
    let ports: Vec<String> = arr(obj, "ports")
        .iter()
        .map(|p| match p.get("port").and_then(Value::as_i64) {
            Some(n) => n.to_string(),
            None => "<unset>".into(),
        })
        .collect();
    if ports.is_empty() {
        "<unset>".into()
    } else {
        ports.join(",")
    }
}

fn slice_endpoints(obj: &Value) -> String {
    let addrs: Vec<String> = arr(obj, "endpoints")
        .iter()
        .flat_map(|e| arr(e, "addresses").iter())
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    first_three(addrs, "<unset>")
}

/// upstream `printPod`, for the states a test creates: ready/total containers, the phase (or
/// the status reason), restarts, and the wide columns.
fn pod_cells(obj: &Value) -> Vec<Value> {
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
    ]
}

#[cfg(test)]
mod tests;
