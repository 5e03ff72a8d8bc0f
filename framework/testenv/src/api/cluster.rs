//! What a kind's admission may know of the cluster beyond the object it admits: the Service
//! address ranges the server was started with ([`AdmissionConfig`]) and which addresses stored
//! Services already hold ([`Allocated`], kept by the store), together a [`Cluster`].

use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

/// Server-wide settings the admission rules depend on.
#[derive(Debug, Clone)]
pub struct AdmissionConfig {
    /// Service ClusterIP range: first address and size.
    pub service_net: (u32, u32),
    /// NodePort range.
    pub node_ports: RangeInclusive<u16>,
}

impl AdmissionConfig {
    /// Parses a CIDR like `10.96.0.0/12`.
    pub fn parse_cidr(cidr: &str) -> Option<(u32, u32)> {
        let (ip, bits) = cidr.split_once('/')?;
        let ip: Ipv4Addr = ip.parse().ok()?;
        let bits: u32 = bits.parse().ok()?;
        if !(8..=30).contains(&bits) {
            return None;
        }
        let size = 1u32 << (32 - bits);
        Some((u32::from(ip) & !(size - 1), size))
    }

    /// The address the `kubernetes` Service gets (first usable in the range).
    pub fn kubernetes_ip(&self) -> String {
        Ipv4Addr::from(self.service_net.0 + 1).to_string()
    }
}

/// The cluster IPs and node ports stored Services hold (`storage::allocations` keeps them).
pub trait Allocated {
    /// Whether a stored Service holds `ip` as its clusterIP.
    fn has_ip(&self, ip: &str) -> bool;
    /// Whether a stored Service holds `port` as a nodePort or healthCheckNodePort.
    fn has_port(&self, port: i64) -> bool;
}

/// The cluster as a kind's admission sees it.
pub struct Cluster<'a> {
    /// The address ranges.
    pub config: &'a AdmissionConfig,
    /// What stored Services hold.
    pub allocated: &'a dyn Allocated,
}
