//! The load-balancer facet of a bare-metal site: a fixed list of VIPs, one per LoadBalancer
//! Service, announced by something outside this process (keepalived, a BGP speaker). The
//! assignments live in memory ([`IpBalancer`]); after a restart each Service keeps the VIP already
//! in its status, so assignments survive restarts without a database.

use std::net::IpAddr;

use cloud_controllers::cloud::CloudError;
use cloud_controllers::service::service_key;
use k8s_openapi::api::core::v1::Service;

use crate::ip_balancer::{Assignments, IpBalancer, IpSource, requested_ips};

/// Which VIP each Service holds.
pub type VipPool = IpBalancer<Vips>;

/// The VIPs a [`VipPool`] hands out, in order.
pub struct Vips(pub Vec<IpAddr>);

impl IpSource for Vips {
    /// The VIP it holds; else one its status or its `spec.loadBalancerIP` names, if in the pool
    /// and free; else the first free.
    fn choose(&self, svc: &Service, assigned: &Assignments) -> Result<IpAddr, CloudError> {
        if let Some(vip) = assigned.get(&service_key(svc)) {
            return Ok(*vip);
        }
        let free = |ip: &IpAddr| self.0.contains(ip) && !assigned.values().any(|v| v == ip);
        let wanted = requested_ips(svc).find(free);
        wanted
            .or_else(|| self.0.iter().copied().find(free))
            .ok_or_else(|| {
                CloudError::other(format!(
                    "all {} VIPs in loadBalancerVIPs are taken: add addresses to the inventory or delete a LoadBalancer Service",
                    self.0.len()
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use cloud_controllers::cloud::LoadBalancer;
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
        VipPool::new(Vips(vec![
            "192.0.2.10".parse().unwrap(),
            "192.0.2.11".parse().unwrap(),
        ]))
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
