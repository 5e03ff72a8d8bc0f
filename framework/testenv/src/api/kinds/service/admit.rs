//! Service defaulting, allocation and validation, as kube-apiserver's Service REST storage does
//! it: clusterIP(s) from the configured range, nodePorts for NodePort / LoadBalancer, single-stack
//! IPv4 families, the defaulted policies, allocated values kept across updates that omit them,
//! type-dependent fields dropped on a type change, and clusterIP immutability.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use rand::Rng;
use serde_json::{Value, json};

use crate::api::cluster::{AdmissionConfig, Allocated, Cluster};
use crate::api::status::{ApiError, Cause, go_quote};

const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

fn needs_node_ports(ty: &str) -> bool {
    ty == "NodePort" || ty == "LoadBalancer"
}

fn go_string_slice(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| go_quote(s)).collect();
    format!("[]string{{{}}}", items.join(", "))
}

fn strings(v: &Value) -> Vec<String> {
    crate::api::validation::string_list(Some(v))
}

/// Defaults, allocates and validates a Service (`old` is `Some` on update).
pub fn admit(obj: &mut Value, old: Option<&Value>, cluster: &Cluster<'_>) -> Result<(), ApiError> {
    let (allocated, cfg) = (cluster.allocated, cluster.config);
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let invalid = |causes: Vec<Cause>| ApiError::invalid("", "Service", &name, causes);
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    let spec = &mut obj["spec"];
    if spec
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        spec["type"] = "ClusterIP".into();
    }
    let ty = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
    if !TYPES.contains(&ty.as_str()) {
        return Err(invalid(vec![Cause::not_supported(
            "spec.type",
            &go_quote(&ty),
            TYPES,
        )]));
    }
    let old_spec = old
        .and_then(|o| o.get("spec"))
        .cloned()
        .unwrap_or(json!({}));
    let old_ty = old_spec.get("type").and_then(Value::as_str).unwrap_or("");

    // Ports: defaults, kept nodePorts, validation.
    let mut causes = Vec::new();
    if !spec.get("ports").is_some_and(Value::is_array) {
        spec.as_object_mut().map(|m| m.remove("ports"));
    }
    let port_count = spec
        .get("ports")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if port_count == 0 && ty != "ExternalName" {
        causes.push(Cause::required("spec.ports", ""));
    }
    let old_ports = old_spec
        .get("ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let drop_node_ports = old.is_some() && needs_node_ports(old_ty) && !needs_node_ports(&ty);
    causes.extend(duplicate_ports(spec));
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for (i, p) in ports.iter_mut().enumerate() {
            if p.get("protocol")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                p["protocol"] = "TCP".into();
            }
            let proto = p["protocol"].as_str().unwrap_or("").to_string();
            if !["SCTP", "TCP", "UDP"].contains(&proto.as_str()) {
                causes.push(Cause::not_supported(
                    format!("spec.ports[{i}].protocol"),
                    &go_quote(&proto),
                    &["SCTP", "TCP", "UDP"],
                ));
            }
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            if !(1..=65535).contains(&port) {
                causes.push(Cause::invalid(
                    format!("spec.ports[{i}].port"),
                    &port.to_string(),
                    "must be between 1 and 65535, inclusive",
                ));
            }
            if p.get("targetPort")
                .is_none_or(|t| t.is_null() || t == 0 || t == "")
            {
                p["targetPort"] = port.into();
            }
            if port_count > 1
                && p.get("name")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            {
                causes.push(Cause::required(format!("spec.ports[{i}].name"), ""));
            }
            let has_np = p
                .get("nodePort")
                .and_then(Value::as_i64)
                .is_some_and(|n| n != 0);
            if drop_node_ports {
                p.as_object_mut().map(|m| m.remove("nodePort"));
            } else if !has_np
                && needs_node_ports(&ty)
                && let Some(np) = old_ports
                    .iter()
                    .find(|o| o["port"] == p["port"] && o["protocol"] == p["protocol"])
                    .and_then(|o| o.get("nodePort"))
            {
                p["nodePort"] = np.clone();
            }
        }
    }

    // Cluster IPs: keep on update, normalize clusterIP vs clusterIPs, then immutability.
    if ty == "ExternalName" {
        if spec
            .get("externalName")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            causes.push(Cause::required("spec.externalName", ""));
        }
        let m = spec.as_object_mut();
        if let Some(m) = m {
            for k in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
                m.remove(k);
            }
            // defaults-service-externalname.txt: defaulted for every type, as upstream's v1
            // defaulting does.
            m.entry("internalTrafficPolicy").or_insert("Cluster".into());
        }
    } else {
        let old_ip = old_spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let old_ips = strings(old_spec.get("clusterIPs").unwrap_or(&Value::Null));
        let mut ip = spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut ips = strings(spec.get("clusterIPs").unwrap_or(&Value::Null));
        if old.is_some() && old_ty != "ExternalName" {
            if ip.is_empty() && (ips.is_empty() || ips == old_ips) {
                ip = old_ip.clone();
                ips = old_ips.clone();
            } else if ip != old_ip && (ips.is_empty() || ips == old_ips) {
                ips = if old_ips.is_empty() {
                    vec![ip.clone()]
                } else {
                    let mut v = old_ips.clone();
                    v[0] = ip.clone();
                    v
                };
            }
            if !old_ips.is_empty() && ips != old_ips {
                causes.push(Cause::invalid(
                    "spec.clusterIPs[0]",
                    &go_string_slice(&ips),
                    "may not change once set",
                ));
            }
        }
        if ip.is_empty() && !ips.is_empty() {
            ip = ips[0].clone();
        }
        if ip.is_empty() && causes.is_empty() {
            ip = allocate_ip(allocated, cfg).ok_or_else(|| {
                ApiError::internal("failed to allocate a serviceIP: range is full")
            })?;
        } else if old.is_none() && !ip.is_empty() && ip != "None" {
            match ip.parse::<Ipv4Addr>() {
                Ok(addr) if in_range(cfg, addr) => {
                    if allocated.has_ip(&ip) {
                        causes.push(Cause::invalid("spec.clusterIPs", &go_string_slice(&[ip.clone()]), &format!("failed to allocate IP {ip}: provided IP is already allocated")));
                    }
                }
                _ => causes.push(Cause::invalid("spec.clusterIPs", &go_string_slice(&[ip.clone()]), &format!("failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {}", range_str(cfg)))),
            }
        }
        if ips.is_empty() {
            ips = vec![ip.clone()];
        }
        spec["clusterIP"] = ip.clone().into();
        spec["clusterIPs"] = json!(ips);
        if spec
            .get("ipFamilies")
            .is_none_or(|v| v.as_array().is_none_or(Vec::is_empty))
        {
            spec["ipFamilies"] = json!(["IPv4"]);
        }
        if spec
            .get("ipFamilyPolicy")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            spec["ipFamilyPolicy"] = "SingleStack".into();
        }
        if spec
            .get("internalTrafficPolicy")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            spec["internalTrafficPolicy"] = "Cluster".into();
        }
    }
    if spec
        .get("sessionAffinity")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        spec["sessionAffinity"] = "None".into();
    }
    if needs_node_ports(&ty) {
        if spec
            .get("externalTrafficPolicy")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            spec["externalTrafficPolicy"] = "Cluster".into();
        }
    } else if let Some(m) = spec.as_object_mut() {
        m.remove("externalTrafficPolicy");
        m.remove("healthCheckNodePort");
    }
    if ty == "LoadBalancer" {
        if spec
            .get("allocateLoadBalancerNodePorts")
            .is_none_or(Value::is_null)
        {
            spec["allocateLoadBalancerNodePorts"] = true.into();
        }
    } else if let Some(m) = spec.as_object_mut() {
        m.remove("allocateLoadBalancerNodePorts");
        m.remove("loadBalancerIP");
        m.remove("loadBalancerClass");
    }
    if !causes.is_empty() {
        return Err(invalid(causes));
    }

    // Node ports last, so validation failures allocate nothing. Ports the old object held stay
    // its own; other explicit ones must be free, as upstream's port allocator requires.
    let held = held_node_ports(&old_spec);
    let mut taken: HashSet<i64> = HashSet::new();
    if needs_node_ports(&ty) {
        let explicit = spec
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(i, p)| Some((i, p.get("nodePort").and_then(Value::as_i64)?)))
            .filter(|(_, n)| *n != 0);
        for (i, np) in explicit {
            if !held.contains(&np) && !taken.contains(&np) && allocated.has_port(np) {
                causes.push(Cause::invalid(
                    format!("spec.ports[{i}].nodePort"),
                    &np.to_string(),
                    "provided port is already allocated",
                ));
            }
            taken.insert(np);
        }
        if !causes.is_empty() {
            return Err(invalid(causes));
        }
    }
    let free = |taken: &HashSet<i64>, p: i64| !taken.contains(&p) && !allocated.has_port(p);
    let allocate = needs_node_ports(&ty)
        && spec.get("allocateLoadBalancerNodePorts") != Some(&Value::Bool(false));
    if allocate && let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut() {
            if p.get("nodePort")
                .and_then(Value::as_i64)
                .is_some_and(|n| n != 0)
            {
                continue;
            }
            let np = allocate_node_port(cfg, |p| free(&taken, p)).ok_or_else(|| {
                ApiError::internal("failed to allocate a nodePort: range is full")
            })?;
            taken.insert(np);
            p["nodePort"] = np.into();
        }
    }
    // healthCheckNodePort: LoadBalancer with externalTrafficPolicy Local gets one (kept across
    // updates), anything else loses it.
    let local_lb =
        ty == "LoadBalancer" && spec.get("externalTrafficPolicy") == Some(&Value::from("Local"));
    let has_hc = spec
        .get("healthCheckNodePort")
        .and_then(Value::as_i64)
        .is_some_and(|n| n != 0);
    if !local_lb {
        spec.as_object_mut()
            .map(|m| m.remove("healthCheckNodePort"));
    } else if !has_hc {
        let kept = old_spec
            .get("healthCheckNodePort")
            .filter(|v| v.as_i64().is_some_and(|n| n != 0));
        let hc = match kept {
            Some(v) => v.clone(),
            None => allocate_node_port(cfg, |p| free(&taken, p))
                .ok_or_else(|| ApiError::internal("failed to allocate a nodePort: range is full"))?
                .into(),
        };
        spec["healthCheckNodePort"] = hc;
    }
    if old.is_none() {
        // Upstream PrepareForCreate resets the status a client sends.
        obj["status"] = json!({"loadBalancer": {}});
    }
    Ok(())
}

fn in_range(cfg: &AdmissionConfig, addr: Ipv4Addr) -> bool {
    let a = u32::from(addr);
    let (base, size) = cfg.service_net;
    a > base && a < base + size - 1
}

fn range_str(cfg: &AdmissionConfig) -> String {
    let (base, size) = cfg.service_net;
    format!("{}/{}", Ipv4Addr::from(base), 32 - size.trailing_zeros())
}

/// The nodePorts and healthCheckNodePort a Service's old spec held (empty on create).
fn held_node_ports(old_spec: &Value) -> HashSet<i64> {
    old_spec
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .chain(old_spec.get("healthCheckNodePort").and_then(Value::as_i64))
        .collect()
}

/// A free clusterIP: probes from a random start, so it is constant time while the range is
/// sparse (it scans the whole range only when the range is nearly full).
fn allocate_ip(allocated: &dyn Allocated, cfg: &AdmissionConfig) -> Option<String> {
    let (base, size) = cfg.service_net;
    // .0 is the network, .1 the kubernetes Service, the last the broadcast address.
    let usable = size.checked_sub(3)?;
    let start = rand::rng().random_range(0..usable);
    (0..usable)
        .map(|i| Ipv4Addr::from(base + 2 + (start + i) % usable).to_string())
        .find(|ip| !allocated.has_ip(ip))
}

/// A free node port, probed from a random start like [`allocate_ip`].
fn allocate_node_port(cfg: &AdmissionConfig, free: impl Fn(i64) -> bool) -> Option<i64> {
    let lo = i64::from(*cfg.node_ports.start());
    let n = i64::from(*cfg.node_ports.end()) - lo + 1;
    let start = rand::rng().random_range(0..n);
    (0..n).map(|i| lo + (start + i) % n).find(|p| free(*p))
}

/// Upstream's check that no two ports share a (protocol, port) pair, with Go's `%#v` of the key.
fn duplicate_ports(spec: &Value) -> Vec<Cause> {
    let mut seen = std::collections::HashSet::new();
    let mut causes = Vec::new();
    let ports = spec.get("ports").and_then(Value::as_array);
    for (i, p) in ports.into_iter().flatten().enumerate() {
        let proto = p
            .get("protocol")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let proto = proto.unwrap_or("TCP").to_string();
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !seen.insert((proto.clone(), port)) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                message: format!(
                    "Duplicate value: core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{port}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
                    go_quote(&proto)
                ),
                field: format!("spec.ports[{i}]"),
            });
        }
    }
    causes
}
