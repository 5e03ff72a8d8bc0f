//! Endpoints and EndpointSlices: port protocol `TCP`; a slice's endpoints get `conditions: {}`
//! and its ports `name: ""`, the zero values their typed objects carry.

use serde_json::{Value, json};

fn each_object(v: Option<&mut Value>) -> impl Iterator<Item = &mut serde_json::Map<String, Value>> {
    v.and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// core/v1 Endpoints.
pub fn default_endpoints(obj: &mut Value) {
    for subset in each_object(obj.get_mut("subsets")) {
        for port in each_object(subset.get_mut("ports")) {
            port.entry("protocol").or_insert("TCP".into());
        }
    }
}

/// discovery.k8s.io/v1 EndpointSlice.
pub fn default_slice(obj: &mut Value) {
    for ep in each_object(obj.get_mut("endpoints")) {
        ep.entry("conditions").or_insert(json!({}));
    }
    for port in each_object(obj.get_mut("ports")) {
        port.entry("name").or_insert("".into());
        port.entry("protocol").or_insert("TCP".into());
    }
}
