//! [`AddressPools`]: the static-inventory provider's LoadBalancer facet once the address-pool
//! controller runs. It hands each LoadBalancer Service one ingress IP from the `AddressPool`s,
//! reading pools and Services from the process's shared informers (attached by the controller's
//! initializer), so it costs no watch of its own.
//!
//! Choice of address, in order: the one it already holds; else one its status (after a restart)
//! or its `spec.loadBalancerIP` names, if free and in an eligible pool; else the first free one of
//! the eligible pools in name order. Eligible: the pool the `metal.example.com/address-pool`
//! annotation names, or else every pool with `autoAssign: true`; never an overlapping or invalid
//! pool. "Free" means no other Service holds it, in this process's assignments or in any
//! Service's status, so assignments survive restarts without a database.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use cloud_controllers::cloud::{CloudError, LoadBalancer};
use controller_manager::informer::Store;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use kube::ResourceExt;
use parking_lot::Mutex;

use super::resource::{AddressPool, AddressRange, POOL_ANNOTATION, usable};

/// Shared between the provider (which allocates) and the address-pool controller (which attaches
/// the informer stores and reports the counts). Cheap to clone.
#[derive(Clone, Default)]
pub struct AddressPools {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    stores: OnceLock<(Store<AddressPool>, Store<Service>)>,
    assigned: Mutex<BTreeMap<String, IpAddr>>,
}

impl AddressPools {
    /// Starts allocating from the pools in `pools`, with `services` telling which addresses are
    /// taken. Called once by the controller's initializer; later calls are ignored.
    pub fn attach(&self, pools: Store<AddressPool>, services: Store<Service>) {
        let _ = self.inner.stores.set((pools, services));
    }

    /// Whether the address-pool controller attached the stores (it runs in this process).
    pub fn is_attached(&self) -> bool {
        self.inner.stores.get().is_some()
    }

    fn assign(&self, svc: &Service) -> Result<IpAddr, CloudError> {
        let Some((pools, services)) = self.inner.stores.get() else {
            return Err(CloudError::other(
                "the address-pool controller is not running: add it to --controllers",
            ));
        };
        let key = key(svc);
        let eligible = eligible(svc, &key, &pools.list())?;
        let mut assigned = self.inner.assigned.lock();
        if let Some(ip) = assigned.get(&key)
            && eligible.iter().any(|(_, r)| r.contains(*ip))
        {
            return Ok(*ip);
        }
        let taken: BTreeSet<IpAddr> = services
            .list()
            .iter()
            .filter(|s| key_of(s) != key)
            .flat_map(|s| ingress_ips(s))
            .chain(
                assigned
                    .iter()
                    .filter(|(k, _)| **k != key)
                    .map(|(_, ip)| *ip),
            )
            .collect();
        let free =
            |ip: &IpAddr| !taken.contains(ip) && eligible.iter().any(|(_, r)| r.contains(*ip));
        let requested = svc
            .spec
            .iter()
            .filter_map(|s| s.load_balancer_ip.as_deref());
        let wanted = ingress_ips(svc)
            .into_iter()
            .chain(requested.filter_map(|ip| ip.parse().ok()))
            .find(|ip| free(ip));
        let ip = wanted
            .or_else(|| eligible.iter().flat_map(|(_, r)| r.iter()).find(|ip| free(ip)))
            .ok_or_else(|| {
                let names: BTreeSet<&str> = eligible.iter().map(|(n, _)| n.as_str()).collect();
                CloudError::other(format!(
                    "no free address in address pool(s) {names:?}: add addresses to a pool or delete a LoadBalancer Service"
                ))
            })?;
        assigned.insert(key, ip);
        Ok(ip)
    }
}

/// The (pool, range) pairs `svc` may get an address from, in pool-name order.
fn eligible(
    svc: &Service,
    key: &str,
    pools: &[Arc<AddressPool>],
) -> Result<Vec<(String, AddressRange)>, CloudError> {
    let mut sorted: Vec<&Arc<AddressPool>> = pools.iter().collect();
    sorted.sort_by_key(|p| p.name_any());
    let wanted = svc.annotations().get(POOL_ANNOTATION);
    let candidates: Vec<&Arc<AddressPool>> = match wanted {
        Some(name) => {
            let pool = sorted.iter().find(|p| p.name_any() == *name).ok_or_else(|| {
                CloudError::other(format!(
                    "Service {key} asks for AddressPool {name:?} ({POOL_ANNOTATION}), which does not exist: create it or fix the annotation"
                ))
            })?;
            vec![*pool]
        }
        None => sorted.into_iter().filter(|p| p.spec.auto_assign).collect(),
    };
    let mut out = Vec::new();
    for pool in &candidates {
        match usable(pool, pools) {
            Ok(ranges) => out.extend(ranges.into_iter().map(|r| (pool.name_any(), r))),
            Err(why) if wanted.is_some() => {
                return Err(CloudError::other(format!(
                    "Service {key} asks for AddressPool {:?}, which hands out no addresses: {why:?}",
                    pool.name_any()
                )));
            }
            Err(_) => {}
        }
    }
    if out.is_empty() {
        return Err(CloudError::other(
            "no usable AddressPool with autoAssign: true: create one, or name one with the metal.example.com/address-pool annotation",
        ));
    }
    Ok(out)
}

fn key(svc: &Service) -> String {
    format!("{}/{}", svc.namespace().unwrap_or_default(), svc.name_any())
}

fn key_of(svc: &Arc<Service>) -> String {
    key(svc)
}

/// The ingress IPs in a Service's status.
pub fn ingress_ips(svc: &Service) -> Vec<IpAddr> {
    svc.status
        .iter()
        .flat_map(|s| s.load_balancer.iter())
        .flat_map(|lb| lb.ingress.iter().flatten())
        .filter_map(|i| i.ip.as_deref()?.parse().ok())
        .collect()
}

fn status(ip: IpAddr) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some(ip.to_string()),
            ..Default::default()
        }]),
    }
}

#[async_trait]
impl LoadBalancer for AddressPools {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        svc: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        // After a restart nothing is in memory, yet the load balancer exists: the address in the
        // Service's status, if a usable pool holds it. (The service controller only calls
        // `ensure_load_balancer_deleted` for load balancers this reports.)
        let held = self.inner.assigned.lock().get(&key(svc)).copied();
        let in_a_pool = |ip: &IpAddr| {
            self.inner.stores.get().is_some_and(|(pools, _)| {
                let all = pools.list();
                all.iter().any(|p| {
                    usable(p, &all).is_ok_and(|ranges| ranges.iter().any(|r| r.contains(*ip)))
                })
            })
        };
        let adopted = || ingress_ips(svc).into_iter().find(in_a_pool);
        Ok(held.or_else(adopted).map(status))
    }

    fn get_load_balancer_name(&self, cluster_name: &str, svc: &Service) -> String {
        format!("{cluster_name}/{}", key(svc))
    }

    async fn ensure_load_balancer(
        &self,
        _cluster_name: &str,
        svc: &Service,
        _nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerStatus, CloudError> {
        self.assign(svc).map(status)
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        _svc: &Service,
        _nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        // The address is announced (ARP, BGP) independently of which Nodes back it.
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        svc: &Service,
    ) -> Result<(), CloudError> {
        self.inner.assigned.lock().remove(&key(svc));
        Ok(())
    }
}
