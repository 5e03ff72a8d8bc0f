//! The endpoints of a Service, both APIs: Endpoints (`v1`, which PUT creates) and EndpointSlice
//! (`discovery.k8s.io/v1`, whose generation the server keeps). Defaults: port protocol `TCP`; a
//! slice's endpoints get `conditions: {}` and its ports `name: ""`, the zero values their typed
//! objects carry. kubectl shows up to three `ip:port`s.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use k8s_pb::api::core::v1 as core_pb;
use k8s_pb::api::discovery::v1 as discovery_pb;
use serde_json::{Value, json};

use crate::api::kind::{
    Admission, Column, Kind, Lifecycle, NameRule, Names, Printer, Protobuf, Rest, Shape, Type,
};
use crate::api::printing::{age, arr, first_three, row, text};

/// Endpoints.
pub const ENDPOINTS: Kind = Kind {
    ty: Type::of::<core::Endpoints>(),
    names: Names {
        singular: "endpoints",
        short: &["ep"],
        categories: &[],
    },
    rest: Rest {
        create_on_update: true,
        ..Rest::PLAIN
    },
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::Subdomain,
    field_selectors: &[],
    patch_lists: &[],
    admission: Admission {
        defaults: Some(default_endpoints),
        ..Admission::NONE
    },
    printer: Printer {
        columns: &[
            Column::text("Name"),
            Column::text("Endpoints"),
            Column::text("Age"),
        ],
        cells: endpoints_cells,
    },
    protobuf: Protobuf::of::<core_pb::Endpoints, core_pb::EndpointsList>(),
    apply: Shape::NONE,
};

/// EndpointSlice.
pub const ENDPOINT_SLICE: Kind = Kind {
    ty: Type::of::<discovery::EndpointSlice>(),
    names: Names {
        singular: "endpointslice",
        short: &[],
        categories: &[],
    },
    rest: Rest {
        generation: true,
        ..Rest::PLAIN
    },
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::Subdomain,
    field_selectors: &[],
    patch_lists: &[],
    admission: Admission {
        defaults: Some(default_slice),
        ..Admission::NONE
    },
    printer: Printer {
        columns: &[
            Column::text("Name"),
            Column::text("AddressType"),
            Column::text("Ports"),
            Column::text("Endpoints"),
            Column::text("Age"),
        ],
        cells: slice_cells,
    },
    protobuf: Protobuf::of::<discovery_pb::EndpointSlice, discovery_pb::EndpointSliceList>(),
    apply: Shape::NONE,
};

fn each_object(v: Option<&mut Value>) -> impl Iterator<Item = &mut serde_json::Map<String, Value>> {
    v.and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// core/v1 Endpoints.
fn default_endpoints(obj: &mut Value) {
    for subset in each_object(obj.get_mut("subsets")) {
        for port in each_object(subset.get_mut("ports")) {
            port.entry("protocol").or_insert("TCP".into());
        }
    }
}

/// discovery.k8s.io/v1 EndpointSlice.
fn default_slice(obj: &mut Value) {
    for ep in each_object(obj.get_mut("endpoints")) {
        ep.entry("conditions").or_insert(json!({}));
    }
    for port in each_object(obj.get_mut("ports")) {
        port.entry("name").or_insert("".into());
        port.entry("protocol").or_insert("TCP".into());
    }
}

fn endpoints_cells(obj: &Value) -> Vec<Value> {
    row(obj, vec![endpoints(obj).into(), age(obj).into()])
}

fn slice_cells(obj: &Value) -> Vec<Value> {
    row(
        obj,
        vec![
            text(obj, "/addressType").into(),
            slice_ports(obj).into(),
            slice_endpoints(obj).into(),
            age(obj).into(),
        ],
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_cut_addresses_at_three() {
        let ep = json!({"metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]}]});
        assert_eq!(
            endpoints_cells(&ep)[1],
            "10.0.0.1:80,10.0.0.1:443,10.0.0.2:80 + 1 more..."
        );
        assert_eq!(
            endpoints_cells(&json!({"metadata": {"name": "e"}}))[1],
            "<none>"
        );
        let slice = json!({"metadata": {"name": "s"}, "addressType": "IPv4", "ports": [{"port": 443}], "endpoints": [{"addresses": ["10.0.0.9"]}]});
        assert_eq!(
            slice_cells(&slice)[1..4],
            [json!("IPv4"), json!("443"), json!("10.0.0.9")]
        );
    }
}
