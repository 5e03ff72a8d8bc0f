//! The fake's `LoadBalancer` facet and the IP pool it allocates ingress addresses from.
//!
//! A load balancer is keyed by the Service's UID (like a real cloud, a re-created Service with the
//! same name gets a new load balancer) and named as upstream's `DefaultLoadBalancerName`: `"a"` +
//! the UID without dashes, truncated to 32 characters. `EnsureLoadBalancer` allocates the lowest
//! free pool address on first use and keeps it for as long as the load balancer lives;
//! `UpdateLoadBalancer` only replaces the backend node set; `EnsureLoadBalancerDeleted` frees
//! the address and succeeds when nothing is there. An exhausted pool is an error, as a cloud out
//! of quota would report.
//!
//! Call-log key: the Service's `namespace/name`.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};

use super::config::{At, ConfigError};
use super::{FakeCloud, Method};
use crate::cloud::{CloudError, LoadBalancer};

/// A load balancer in the fake cloud, as tests inspect it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeLoadBalancer {
    /// Upstream `DefaultLoadBalancerName` of the Service.
    pub name: String,
    /// `namespace/name` of the Service it serves.
    pub service: String,
    /// UID of that Service (the key; empty if the Service had none).
    pub service_uid: String,
    /// `--cluster-name` it was created for.
    pub cluster_name: String,
    /// The ingress address allocated from the pool.
    pub ip: IpAddr,
    /// Names of the backend nodes, sorted.
    pub nodes: Vec<String>,
    /// Service ports it forwards (`spec.ports[].port`), in Service order.
    pub ports: Vec<i32>,
}

/// Upstream `cloudprovider.DefaultLoadBalancerName`: `"a"` + UID without `-`, at most 32 chars.
pub fn default_load_balancer_name(svc: &Service) -> String {
    let uid = svc.metadata.uid.as_deref().unwrap_or_default();
    let mut name: String = std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .collect();
    name.truncate(32);
    name
}

fn service_key(svc: &Service) -> String {
    format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or_default(),
        svc.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The map key of a Service's load balancer: its UID, or `namespace/name` for hand-built
/// Services without one (the API server always sets a UID).
fn lb_key(svc: &Service) -> String {
    match svc.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() => uid.to_owned(),
        _ => service_key(svc),
    }
}

fn node_names(nodes: &[Arc<Node>]) -> Vec<String> {
    let names: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    names.into_iter().collect()
}

fn status_for(ip: IpAddr) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some(ip.to_string()),
            ..LoadBalancerIngress::default()
        }]),
    }
}

#[async_trait]
impl LoadBalancer for FakeCloud {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        svc: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        self.call(Method::GetLoadBalancer, service_key(svc), |w| {
            Ok(w.load_balancers
                .get(&lb_key(svc))
                .map(|lb| status_for(lb.ip)))
        })
        .await
    }

    fn get_load_balancer_name(&self, _cluster_name: &str, svc: &Service) -> String {
        self.record_infallible(Method::GetLoadBalancerName, service_key(svc));
        default_load_balancer_name(svc)
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        svc: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerStatus, CloudError> {
        self.call(Method::EnsureLoadBalancer, service_key(svc), |w| {
            let key = lb_key(svc);
            let ports = svc
                .spec
                .as_ref()
                .and_then(|s| s.ports.as_ref())
                .map(|ports| ports.iter().map(|p| p.port).collect())
                .unwrap_or_default();
            if let Some(lb) = w.load_balancers.get_mut(&key) {
                lb.nodes = node_names(nodes);
                lb.ports = ports;
                return Ok(status_for(lb.ip));
            }
            let ip = w.pool.allocate().ok_or_else(|| {
                CloudError::other(format!(
                    "load balancer IP pool exhausted ({} addresses in use)",
                    w.pool.in_use()
                ))
            })?;
            w.load_balancers.insert(
                key,
                FakeLoadBalancer {
                    name: default_load_balancer_name(svc),
                    service: service_key(svc),
                    service_uid: svc.metadata.uid.clone().unwrap_or_default(),
                    cluster_name: cluster_name.to_owned(),
                    ip,
                    nodes: node_names(nodes),
                    ports,
                },
            );
            Ok(status_for(ip))
        })
        .await
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        svc: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        self.call(Method::UpdateLoadBalancer, service_key(svc), |w| {
            match w.load_balancers.get_mut(&lb_key(svc)) {
                Some(lb) => {
                    lb.nodes = node_names(nodes);
                    Ok(())
                }
                None => Err(CloudError::other(format!(
                    "load balancer {} for service {} not found",
                    default_load_balancer_name(svc),
                    service_key(svc)
                ))),
            }
        })
        .await
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        svc: &Service,
    ) -> Result<(), CloudError> {
        self.call(Method::EnsureLoadBalancerDeleted, service_key(svc), |w| {
            if let Some(lb) = w.load_balancers.remove(&lb_key(svc)) {
                w.pool.release(lb.ip);
            }
            Ok(())
        })
        .await
    }
}

/// A contiguous run of pool addresses.
#[derive(Clone, Debug)]
struct IpRange {
    first: IpAddr,
    count: u128,
}

impl IpRange {
    fn nth(&self, n: u128) -> Option<IpAddr> {
        if n >= self.count {
            return None;
        }
        match self.first {
            IpAddr::V4(a) => u32::try_from(u128::from(u32::from(a)) + n)
                .ok()
                .map(|v| IpAddr::V4(Ipv4Addr::from(v))),
            IpAddr::V6(a) => u128::from(a)
                .checked_add(n)
                .map(|v| IpAddr::V6(Ipv6Addr::from(v))),
        }
    }
}

/// Addresses load balancers get their ingress IP from; the lowest free one is handed out first.
#[derive(Clone, Debug)]
pub(super) struct IpPool {
    ranges: Vec<IpRange>,
    allocated: BTreeSet<IpAddr>,
}

impl IpPool {
    /// `192.0.2.0/24` (TEST-NET-1, reserved for documentation): never a real address.
    pub(super) fn default_pool() -> Self {
        Self {
            ranges: vec![cidr_hosts(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 0)), 24)],
            allocated: BTreeSet::new(),
        }
    }

    /// A pool from CIDRs (their host addresses) and single addresses.
    pub(super) fn parse(cidrs: &[String], addresses: &[String]) -> Result<Self, ConfigError> {
        Self::parse_at(
            cidrs.iter().map(|c| (c.as_str(), At::default())),
            addresses.iter().map(|a| (a.as_str(), At::default())),
        )
    }

    /// As [`Self::parse`], with the config-file location of each entry for error messages.
    pub(super) fn parse_at<'a>(
        cidrs: impl IntoIterator<Item = (&'a str, At)>,
        addresses: impl IntoIterator<Item = (&'a str, At)>,
    ) -> Result<Self, ConfigError> {
        let mut ranges = Vec::new();
        for (cidr, at) in cidrs {
            let (network, prefix) =
                parse_cidr(cidr).map_err(|reason| ConfigError::InvalidCidr {
                    cidr: cidr.to_owned(),
                    reason,
                    at,
                })?;
            ranges.push(cidr_hosts(network, prefix));
        }
        for (address, at) in addresses {
            let ip = address
                .parse::<IpAddr>()
                .map_err(|_| ConfigError::InvalidPoolAddress {
                    address: address.to_owned(),
                    at,
                })?;
            ranges.push(IpRange {
                first: ip,
                count: 1,
            });
        }
        if ranges.is_empty() {
            return Err(ConfigError::EmptyPool);
        }
        Ok(Self {
            ranges,
            allocated: BTreeSet::new(),
        })
    }

    pub(super) fn allocate(&mut self) -> Option<IpAddr> {
        for range in &self.ranges {
            let mut n = 0;
            while let Some(ip) = range.nth(n) {
                if self.allocated.insert(ip) {
                    return Some(ip);
                }
                n += 1;
            }
        }
        None
    }

    pub(super) fn release(&mut self, ip: IpAddr) {
        self.allocated.remove(&ip);
    }

    pub(super) fn in_use(&self) -> usize {
        self.allocated.len()
    }
}

/// Parses `a.b.c.d/n` or `x::/n`; host bits may be set (as Go's `net.ParseCIDR` allows) and
/// are masked off.
fn parse_cidr(cidr: &str) -> Result<(IpAddr, u8), String> {
    let (addr, prefix) = cidr
        .split_once('/')
        .ok_or_else(|| "expected ADDRESS/PREFIX, e.g. 192.0.2.0/24".to_owned())?;
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| format!("{addr:?} is not an IP address"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= max)
        .ok_or_else(|| format!("prefix length {prefix:?} is not a number from 0 to {max}"))?;
    let network = match addr {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
        }
    };
    Ok((network, prefix))
}

/// Usable host addresses of a network: IPv4 skips network and broadcast addresses (except /31
/// and /32), IPv6 skips the subnet-router anycast address (except /127 and /128).
fn cidr_hosts(network: IpAddr, prefix: u8) -> IpRange {
    let bits = if network.is_ipv4() { 32 } else { 128 };
    let host_bits = u32::from(bits - prefix);
    let size = 1u128.checked_shl(host_bits).unwrap_or(u128::MAX);
    let (skip_first, skip_last) = match (network, host_bits) {
        (_, 0 | 1) => (0, 0),
        (IpAddr::V4(_), _) => (1, 1),
        (IpAddr::V6(_), _) => (1, 0),
    };
    IpRange {
        first: IpRange {
            first: network,
            count: size,
        }
        .nth(skip_first)
        .unwrap_or(network),
        count: size - skip_first - skip_last,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn svc(name: &str, uid: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                namespace: Some("default".into()),
                name: Some(name.into()),
                uid: Some(uid.into()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".into()),
                ports: Some(vec![ServicePort {
                    port: 80,
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    fn nodes(names: &[&str]) -> Vec<Arc<Node>> {
        names
            .iter()
            .map(|n| {
                Arc::new(Node {
                    metadata: ObjectMeta {
                        name: Some((*n).into()),
                        ..ObjectMeta::default()
                    },
                    ..Node::default()
                })
            })
            .collect()
    }

    fn ingress_ip(status: &LoadBalancerStatus) -> &str {
        status.ingress.as_ref().unwrap()[0].ip.as_deref().unwrap()
    }

    #[test]
    fn name_is_upstream_default_load_balancer_name() {
        let s = svc("web", "8c4c8a32-0f3e-4b7a-9d0a-6f1b2c3d4e5f");
        assert_eq!(
            default_load_balancer_name(&s),
            "a8c4c8a320f3e4b7a9d0a6f1b2c3d4e5"
        );
        assert_eq!(default_load_balancer_name(&s).len(), 32);
        assert_eq!(default_load_balancer_name(&svc("web", "ab-c")), "aabc");
    }

    #[tokio::test]
    async fn ensure_allocates_a_stable_ip_and_tracks_nodes() {
        let cloud = FakeCloud::builder()
            .lb_pool_cidr("10.1.0.0/30")
            .build()
            .unwrap();
        let web = svc("web", "uid-1");
        let status = cloud
            .ensure_load_balancer("k", &web, &nodes(&["n2", "n1"]))
            .await
            .unwrap();
        assert_eq!(ingress_ip(&status), "10.1.0.1");
        let again = cloud
            .ensure_load_balancer("k", &web, &nodes(&["n1"]))
            .await
            .unwrap();
        assert_eq!(ingress_ip(&again), "10.1.0.1");
        let lb = cloud.lb_for("default/web").unwrap();
        assert_eq!(lb.nodes, vec!["n1"]);
        assert_eq!(lb.ports, vec![80]);
        assert_eq!(lb.cluster_name, "k");
        let got = cloud.get_load_balancer("k", &web).await.unwrap().unwrap();
        assert_eq!(ingress_ip(&got), "10.1.0.1");
    }

    #[tokio::test]
    async fn update_changes_only_nodes_and_needs_an_existing_lb() {
        let cloud = FakeCloud::new();
        let web = svc("web", "uid-1");
        assert!(
            cloud
                .update_load_balancer("k", &web, &nodes(&["n1"]))
                .await
                .is_err()
        );
        cloud
            .ensure_load_balancer("k", &web, &nodes(&["n1"]))
            .await
            .unwrap();
        cloud
            .update_load_balancer("k", &web, &nodes(&["n3", "n2"]))
            .await
            .unwrap();
        assert_eq!(cloud.lb_for("default/web").unwrap().nodes, vec!["n2", "n3"]);
    }

    #[tokio::test]
    async fn delete_frees_the_ip_and_is_idempotent() {
        let cloud = FakeCloud::builder()
            .lb_pool_addresses(["10.9.9.9"])
            .build()
            .unwrap();
        let a = svc("a", "uid-a");
        let b = svc("b", "uid-b");
        cloud.ensure_load_balancer("k", &a, &[]).await.unwrap();
        let exhausted = cloud.ensure_load_balancer("k", &b, &[]).await.unwrap_err();
        assert!(exhausted.to_string().contains("exhausted"), "{exhausted}");
        cloud.ensure_load_balancer_deleted("k", &a).await.unwrap();
        cloud.ensure_load_balancer_deleted("k", &a).await.unwrap();
        assert!(cloud.get_load_balancer("k", &a).await.unwrap().is_none());
        let status = cloud.ensure_load_balancer("k", &b, &[]).await.unwrap();
        assert_eq!(ingress_ip(&status), "10.9.9.9");
        assert_eq!(cloud.load_balancers().len(), 1);
    }

    #[tokio::test]
    async fn recreated_service_with_new_uid_gets_a_new_lb() {
        let cloud = FakeCloud::new();
        cloud
            .ensure_load_balancer("k", &svc("web", "uid-1"), &[])
            .await
            .unwrap();
        let status = cloud
            .ensure_load_balancer("k", &svc("web", "uid-2"), &[])
            .await
            .unwrap();
        assert_eq!(ingress_ip(&status), "192.0.2.2");
        assert_eq!(cloud.load_balancers().len(), 2);
    }

    #[tokio::test]
    async fn calls_are_keyed_by_service_and_faults_apply() {
        let cloud = FakeCloud::new();
        let web = svc("web", "uid-1");
        cloud.fail(
            Method::EnsureLoadBalancer,
            FaultSpec::retry("busy", std::time::Duration::from_secs(9)).times(1),
        );
        let err = cloud
            .ensure_load_balancer("k", &web, &[])
            .await
            .unwrap_err();
        assert_eq!(err.retry_after(), Some(std::time::Duration::from_secs(9)));
        assert!(cloud.lb_for("default/web").is_none());
        cloud.ensure_load_balancer("k", &web, &[]).await.unwrap();
        let _ = cloud.get_load_balancer_name("k", &web);
        let calls = cloud.calls_to(Method::EnsureLoadBalancer);
        assert_eq!(calls.len(), 2);
        assert!(calls.iter().all(|c| c.key == "default/web"));
        assert!(!calls[0].outcome.is_ok() && calls[1].outcome.is_ok());
        assert_eq!(cloud.calls_to(Method::GetLoadBalancerName).len(), 1);
    }

    use super::super::FaultSpec;

    #[test]
    fn cidr_hosts_skip_network_and_broadcast() {
        let mut pool = IpPool::parse(&["10.0.0.5/30".into()], &[]).unwrap();
        let got: Vec<_> = std::iter::from_fn(|| pool.allocate()).collect();
        // Host bits are masked: 10.0.0.5/30 is 10.0.0.4/30, hosts .5 and .6.
        assert_eq!(
            got,
            vec![
                "10.0.0.5".parse::<IpAddr>().unwrap(),
                "10.0.0.6".parse().unwrap()
            ]
        );
        let mut pool = IpPool::parse(&["10.0.0.7/32".into()], &[]).unwrap();
        assert_eq!(pool.allocate(), Some("10.0.0.7".parse().unwrap()));
        assert_eq!(pool.allocate(), None);
        let mut pool = IpPool::parse(&["2001:db8::/126".into()], &[]).unwrap();
        let got: Vec<_> = std::iter::from_fn(|| pool.allocate()).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], "2001:db8::1".parse::<IpAddr>().unwrap());
        let mut pool = IpPool::parse(&["::/0".into()], &[]).unwrap();
        assert_eq!(pool.allocate(), Some("::1".parse().unwrap()));
    }

    #[test]
    fn bad_cidrs_and_addresses_are_rejected_with_a_reason() {
        for bad in ["10.0.0.0", "10.0.0.0/33", "x/24", "10.0.0.0/abc", "::/129"] {
            let err = IpPool::parse(&[bad.into()], &[]).unwrap_err();
            assert!(
                matches!(err, ConfigError::InvalidCidr { .. }),
                "{bad}: {err}"
            );
        }
        let err = IpPool::parse(&[], &["10.0.0.300".into()]).unwrap_err();
        assert!(
            matches!(err, ConfigError::InvalidPoolAddress { .. }),
            "{err}"
        );
        assert!(matches!(
            IpPool::parse(&[], &[]),
            Err(ConfigError::EmptyPool)
        ));
    }
}
