//! The cluster IPs and node ports stored Services hold, kept up to date by the store on every
//! write so that allocating or checking one is constant time instead of a scan of every Service
//! (the ranges they come from are `api::cluster::AdmissionConfig`).
//!
//! Like kube-apiserver's IP and port allocators it is derived from the stored Services, but here
//! it is updated in the same step as the object map (under the store lock), so it cannot drift:
//! create, update (type changes that drop nodePorts, clusterIP "None"), delete (also after the
//! last finalizer is removed, namespace deletion, deletecollection) all go through
//! `State::put` / `State::remove`, and a restart keeps the store and so this index.
//! Values are reference-counted because several Services may hold the same value (every headless
//! Service holds clusterIP "None"; a Service may repeat a nodePort across protocols).

use std::collections::HashMap;

use serde_json::Value;

use crate::api::cluster::Allocated;

/// Reference counts of the cluster IPs and node ports (including healthCheckNodePorts) that
/// stored Services hold; exists so Service admission need not scan the store.
#[derive(Debug, Default)]
pub struct Allocations {
    ips: HashMap<String, u32>,
    ports: HashMap<i64, u32>,
}

impl Allocated for Allocations {
    fn has_ip(&self, ip: &str) -> bool {
        self.ips.contains_key(ip)
    }

    fn has_port(&self, port: i64) -> bool {
        self.ports.contains_key(&port)
    }
}

impl Allocations {
    /// Counts what `service` holds; called when it enters the store.
    pub fn add(&mut self, service: &Value) {
        if let Some(ip) = cluster_ip(service) {
            *self.ips.entry(ip.to_string()).or_default() += 1;
        }
        for p in node_ports(service) {
            *self.ports.entry(p).or_default() += 1;
        }
    }

    /// Releases what `service` held; called when it leaves the store or is replaced.
    pub fn release(&mut self, service: &Value) {
        if let Some(ip) = cluster_ip(service) {
            decrement(&mut self.ips, ip);
        }
        for p in node_ports(service) {
            decrement(&mut self.ports, &p);
        }
    }
}

fn decrement<K, Q>(map: &mut HashMap<K, u32>, key: &Q)
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ?Sized,
{
    if let Some(n) = map.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            map.remove(key);
        }
    }
}

fn cluster_ip(service: &Value) -> Option<&str> {
    service.pointer("/spec/clusterIP").and_then(Value::as_str)
}

fn node_ports(service: &Value) -> impl Iterator<Item = i64> + '_ {
    service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .chain(
            service
                .pointer("/spec/healthCheckNodePort")
                .and_then(Value::as_i64),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shared_values_stay_held_until_the_last_holder_is_released() {
        let mut a = Allocations::default();
        let h1 = json!({"spec": {"clusterIP": "None", "ports": [{"nodePort": 30001}]}});
        let h2 = json!({"spec": {"clusterIP": "None", "healthCheckNodePort": 30002}});
        a.add(&h1);
        a.add(&h2);
        a.release(&h1);
        assert!(a.has_ip("None"), "h2 still holds None");
        assert!(!a.has_port(30001));
        assert!(a.has_port(30002));
        a.release(&h2);
        assert!(!a.has_ip("None"));
        assert!(!a.has_port(30002));
    }
}
