//! The load-balancer facet of a bare-metal site: a fixed list of VIPs, one per LoadBalancer
//! Service, announced by something outside this process (keepalived, a BGP speaker). Only the
//! assignment lives here, in memory; after a restart each Service keeps the VIP already in its
//! status, so assignments survive restarts without a database.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use cloud_controllers::cloud::{CloudError, LoadBalancer};
use cloud_controllers::service::service_key;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};
use parking_lot::Mutex;

use crate::address_pool::allocator::status;

/// Which VIP each Service holds.
pub struct VipPool {
    vips: Vec<IpAddr>,
    assigned: Mutex<BTreeMap<String, IpAddr>>,
}

impl VipPool {
    /// A pool handing out `vips`, in order.
    pub fn new(vips: Vec<IpAddr>) -> Self {
        VipPool {
            vips,
            assigned: Mutex::new(BTreeMap::new()),
        }
    }

    /// Picks the VIP for `svc`: the one it holds; else one its status or its (deprecated but
    /// common on bare metal) `spec.loadBalancerIP` names, if in the pool and free; else the first free.
    fn assign(&self, svc: &Service) -> Result<IpAddr, CloudError> {
        let key = service_key(svc);
        let mut assigned = self.assigned.lock();
        if let Some(vip) = assigned.get(&key) {
            return Ok(*vip);
        }
        let taken = |ip: &IpAddr| assigned.values().any(|v| v == ip);
        let status_ips = svc
            .status
            .iter()
            .flat_map(|s| s.load_balancer.iter())
            .flat_map(|lb| lb.ingress.iter().flatten())
            .filter_map(|i| i.ip.as_deref());
        let requested = svc
            .spec
            .iter()
            .filter_map(|s| s.load_balancer_ip.as_deref());
        let wanted = status_ips
            .chain(requested)
            .filter_map(|ip| ip.parse::<IpAddr>().ok())
            .find(|ip| self.vips.contains(ip) && !taken(ip));
        let vip = wanted
            .or_else(|| self.vips.iter().copied().find(|ip| !taken(ip)))
            .ok_or_else(|| {
                CloudError::other(format!(
                    "all {} VIPs in loadBalancerVIPs are taken: add addresses to the inventory or delete a LoadBalancer Service",
                    self.vips.len()
                ))
            })?;
        assigned.insert(key, vip);
        Ok(vip)
    }
}

#[async_trait]
impl LoadBalancer for VipPool {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        svc: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        Ok(self
            .assigned
            .lock()
            .get(&service_key(svc))
            .copied()
            .map(status))
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
        self.assign(svc).map(status)
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        _svc: &Service,
        _nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        // The VIP is announced independently of which Nodes back it.
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn svc(name: &str, status_ip: Option<&str>) -> Service {
        let ingress: Vec<_> = status_ip.iter().map(|ip| json!({"ip": ip})).collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "status": {"loadBalancer": {"ingress": ingress}},
        }))
        .unwrap()
    }

    fn pool() -> VipPool {
        VipPool::new(vec![
            "192.0.2.10".parse().unwrap(),
            "192.0.2.11".parse().unwrap(),
        ])
    }

    async fn ensure(p: &VipPool, s: &Service) -> Result<String, CloudError> {
        let st = p.ensure_load_balancer("k", s, &[]).await?;
        Ok(st.ingress.unwrap()[0].ip.clone().unwrap())
    }

    #[tokio::test]
    async fn one_stable_vip_per_service_until_deleted() {
        let p = pool();
        assert_eq!(ensure(&p, &svc("a", None)).await.unwrap(), "192.0.2.10");
        assert_eq!(ensure(&p, &svc("a", None)).await.unwrap(), "192.0.2.10");
        assert_eq!(ensure(&p, &svc("b", None)).await.unwrap(), "192.0.2.11");
        let full = ensure(&p, &svc("c", None)).await.unwrap_err();
        assert!(full.to_string().contains("all 2 VIPs"), "{full}");
        p.ensure_load_balancer_deleted("k", &svc("a", None))
            .await
            .unwrap();
        assert!(
            p.get_load_balancer("k", &svc("a", None))
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(ensure(&p, &svc("c", None)).await.unwrap(), "192.0.2.10");
    }

    #[tokio::test]
    async fn after_a_restart_services_keep_the_vip_in_their_status() {
        let p = pool();
        assert_eq!(
            ensure(&p, &svc("b", Some("192.0.2.11"))).await.unwrap(),
            "192.0.2.11"
        );
        // An address outside the pool is not adopted.
        assert_eq!(
            ensure(&p, &svc("a", Some("203.0.113.1"))).await.unwrap(),
            "192.0.2.10"
        );
    }
}
