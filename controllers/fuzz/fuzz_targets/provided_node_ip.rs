//! The kubelet-written `alpha.kubernetes.io/provided-node-ip` annotation: any string must parse or
//! be rejected with an error, and matching it against cloud addresses must never panic.
#![no_main]

use cloud_controllers::node::addresses::{
    addresses_from_node_ip, parse_ip_sloppy, parse_provided_node_ip,
};
use k8s_openapi::api::core::v1::NodeAddress;
use libfuzzer_sys::fuzz_target;

fn addr(type_: &str, address: &str) -> NodeAddress {
    NodeAddress {
        type_: type_.to_string(),
        address: address.to_string(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(annotation) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_ip_sloppy(annotation);
    if let Ok(ips) = parse_provided_node_ip(annotation) {
        assert!(
            !ips.is_empty() && ips.len() <= 2,
            "{annotation:?} gave {ips:?}"
        );
    }
    let cloud = [
        addr("InternalIP", "10.0.0.1"),
        addr("InternalIP", "fd00::1"),
        addr("ExternalIP", "203.0.113.7"),
        addr("Hostname", "node-1"),
        addr("InternalIP", annotation),
    ];
    if let Err(e) = addresses_from_node_ip(annotation, &cloud) {
        let _ = e.to_string();
    }
});
