//! Labels and names on Nodes come from anyone who can write a Node: the exclusion label's Go-bool
//! parser and the node-set predicates must answer for any value and any name.
#![no_main]

use std::collections::BTreeMap;

use cloud_controllers::service::predicates::{
    EXCLUDE_FROM_LOAD_BALANCERS_LABEL, node_included, parse_go_bool, stable_node_predicate,
};
use k8s_openapi::api::core::v1::Node;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (name, value) = text.split_once('\n').unwrap_or((text, text));
    let parsed = parse_go_bool(value);
    let mut node = Node::default();
    node.metadata.name = Some(name.to_string());
    node.metadata.labels = Some(BTreeMap::from([(
        EXCLUDE_FROM_LOAD_BALANCERS_LABEL.to_string(),
        value.to_string(),
    )]));
    // Fails closed: only a value that parses as false keeps the node in load balancers.
    assert_eq!(node_included(&node), parsed == Some(false), "{value:?}");
    let _ = stable_node_predicate(&node);
});
