//! [`IpBalancer`]: the LoadBalancer facet of a bare-metal site, one ingress IP per LoadBalancer
//! Service, announced by something outside this process (keepalived, ARP, BGP) whichever Nodes
//! back it. Only the assignment lives here, in memory; an [`IpSource`] says which address a Service
//! gets, so the static VIP list and the `AddressPool`s share everything else.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use cloud_controllers::cloud::{CloudError, LoadBalancer};
use cloud_controllers::service::service_key;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use parking_lot::Mutex;

/// Which address each Service holds: Service key → address.
pub type Assignments = BTreeMap<String, IpAddr>;

/// Where a balancer's addresses come from.
pub trait IpSource: Send + Sync {
    /// The address `svc` should hold, given this process's assignments.
    fn choose(&self, svc: &Service, assigned: &Assignments) -> Result<IpAddr, CloudError>;

    /// The address `svc`'s load balancer has although this process assigned none (after a
    /// restart), if the source still hands it out.
    fn adopt(&self, _svc: &Service) -> Option<IpAddr> {
        None
    }
}

/// Which address each Service holds, from the addresses `S` hands out.
#[derive(Default)]
pub struct IpBalancer<S> {
    source: S,
    assigned: Mutex<Assignments>,
}

impl<S> IpBalancer<S> {
    /// A balancer handing out the addresses of `source`.
    pub fn new(source: S) -> Self {
        IpBalancer {
            source,
            assigned: Mutex::default(),
        }
    }

    /// Where the addresses come from.
    pub fn source(&self) -> &S {
        &self.source
    }
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

/// The addresses `svc` asks for, in order: those its status holds (after a restart), then its
/// (deprecated but common on bare metal) `spec.loadBalancerIP`.
pub fn requested_ips(svc: &Service) -> impl Iterator<Item = IpAddr> + '_ {
    let spec = svc
        .spec
        .iter()
        .filter_map(|s| s.load_balancer_ip.as_deref());
    ingress_ips(svc)
        .into_iter()
        .chain(spec.filter_map(|ip| ip.parse().ok()))
}

/// The LoadBalancer status announcing `ip`.
fn status(ip: IpAddr) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some(ip.to_string()),
            ..Default::default()
        }]),
    }
}

#[async_trait]
impl<S: IpSource> LoadBalancer for IpBalancer<S> {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        svc: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        // The service controller only calls `ensure_load_balancer_deleted` for load balancers
        // this reports, so one held before a restart is reported too.
        let held = self.assigned.lock().get(&service_key(svc)).copied();
        Ok(held.or_else(|| self.source.adopt(svc)).map(status))
    }

    fn get_load_balancer_name(&self, cluster_name: &str, svc: &Service) -> String {
        format!("{cluster_name}/{}", service_key(svc))
    }

    async fn ensure_load_balancer(
        &self,
        _cluster_name: &str,
        svc: &Service,
        _nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let mut assigned = self.assigned.lock();
        let ip = self.source.choose(svc, &assigned)?;
        assigned.insert(service_key(svc), ip);
        Ok(status(ip))
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        _svc: &Service,
        _nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        // The address is announced independently of which Nodes back it.
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        svc: &Service,
    ) -> Result<(), CloudError> {
        self.assigned.lock().remove(&service_key(svc));
        Ok(())
    }
}
