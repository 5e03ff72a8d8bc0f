//! The fake's `LoadBalancer` facet.
//!
//! A load balancer is keyed by the Service's UID (like a real cloud, a re-created Service with the
//! same name gets a new load balancer) and named as upstream's `DefaultLoadBalancerName`: `"a"` +
//! the UID without dashes, truncated to 32 characters. `EnsureLoadBalancer` allocates the lowest
//! free pool address on first use and keeps it for as long as the load balancer lives;
//! a Service's `spec.loadBalancerIP` is honoured when it is a free pool address (an error
//! otherwise), and `spec.ipFamilies[0]` picks the address family.
//! `UpdateLoadBalancer` only replaces the backend node set; `EnsureLoadBalancerDeleted` frees
//! the address and succeeds when nothing is there. An exhausted pool is an error, as a cloud out
//! of quota would report.
//!
//! Call-log key: the Service's `namespace/name`.
//!
//! Backend node sets are shared, not copied (see `lb_store.rs`).

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, Service, ServiceSpec,
};

use super::ip_pool::ClaimError;
use super::lb_store::StoredLb;
use super::world::World;
use super::{FakeCloud, Method};
use cloud_controllers::cloud::{CloudError, LoadBalancer};

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

/// The address the load balancer of `svc` gets: the requested one if any (moving it when the
/// request changed), else the one it has, else the lowest free one of the Service's first family.
fn choose_ip(w: &mut World, svc: &Service, current: Option<IpAddr>) -> Result<IpAddr, CloudError> {
    match (requested_ip(svc)?, current) {
        (None, Some(ip)) => Ok(ip),
        (Some(want), Some(ip)) if want == ip => Ok(ip),
        (Some(want), current) => {
            claim(w, want, svc)?;
            if let Some(old) = current {
                w.pool.release(old);
            }
            Ok(want)
        }
        (None, None) => {
            let first_family = svc
                .spec
                .as_ref()
                .and_then(|s| s.ip_families.as_ref())
                .and_then(|f| f.first())
                .map(String::as_str);
            let (ipv6, family) = match first_family {
                Some("IPv6") => (Some(true), " for IPv6"),
                Some("IPv4") => (Some(false), " for IPv4"),
                _ => (None, ""),
            };
            w.pool.allocate(ipv6).ok_or_else(|| {
                CloudError::other(format!(
                    "load balancer IP pool exhausted{family} ({} addresses in use)",
                    w.pool.in_use()
                ))
            })
        }
    }
}

/// The deprecated `spec.loadBalancerIP`, which clouds that support it honour.
fn requested_ip(svc: &Service) -> Result<Option<IpAddr>, CloudError> {
    match svc
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_ip.as_deref())
    {
        None | Some("") => Ok(None),
        Some(ip) => ip.parse().map(Some).map_err(|_| {
            CloudError::other(format!("spec.loadBalancerIP {ip:?} is not an IP address"))
        }),
    }
}

fn claim(w: &mut World, ip: IpAddr, svc: &Service) -> Result<(), CloudError> {
    w.pool.claim(ip).map_err(|e| {
        let why = match e {
            ClaimError::NotInPool => "is not in the load balancer IP pool",
            ClaimError::InUse => "is already used by another load balancer",
        };
        CloudError::other(format!(
            "spec.loadBalancerIP {ip} of service {} {why}",
            service_key(svc)
        ))
    })
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
            let spec = svc.spec.clone().unwrap_or_default();
            let ports = spec.ports.iter().flatten().map(|p| p.port).collect();
            let current = w.load_balancers.get(&key);
            let current_ip = current.map(|lb| lb.ip);
            let nodes = w.node_sets.get(nodes, current.map(|lb| &lb.nodes));
            let ip = choose_ip(w, svc, current_ip)?;
            let lb = w.load_balancers.entry(key).or_insert_with(|| StoredLb {
                name: default_load_balancer_name(svc),
                service: service_key(svc),
                service_uid: svc.metadata.uid.clone().unwrap_or_default(),
                cluster_name: cluster_name.to_owned(),
                ip,
                nodes: Arc::clone(&nodes),
                ports: Vec::new(),
                service_spec: ServiceSpec::default(),
            });
            lb.ip = ip;
            lb.nodes = nodes;
            lb.ports = ports;
            lb.service_spec = spec;
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
            let World {
                load_balancers,
                node_sets,
                ..
            } = w;
            match load_balancers.get_mut(&lb_key(svc)) {
                Some(lb) => {
                    lb.nodes = node_sets.get(nodes, Some(&lb.nodes));
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::FaultSpec;
    use std::collections::BTreeSet;

    fn svc(name: &str, uid: &str) -> Service {
        Service {
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".into()),
                ports: Some(vec![ServicePort {
                    port: 80,
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            ..crate::objects::service(name, uid)
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
        assert_eq!(lb.service_spec.type_.as_deref(), Some("LoadBalancer"));
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
        let counts = cloud.load_balancer_node_counts();
        assert_eq!(
            counts.into_iter().collect::<Vec<_>>(),
            [("default/web".to_owned(), 2)]
        );
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

    #[tokio::test]
    async fn requested_load_balancer_ip_is_honoured_or_refused() {
        let cloud = FakeCloud::builder()
            .lb_pool_cidr("10.1.0.0/29")
            .build()
            .unwrap();
        let mut web = svc("web", "uid-1");
        web.spec.as_mut().unwrap().load_balancer_ip = Some("10.1.0.5".into());
        let status = cloud.ensure_load_balancer("k", &web, &[]).await.unwrap();
        assert_eq!(ingress_ip(&status), "10.1.0.5");

        // Changing the request moves the LB and frees the old address.
        web.spec.as_mut().unwrap().load_balancer_ip = Some("10.1.0.6".into());
        let status = cloud.ensure_load_balancer("k", &web, &[]).await.unwrap();
        assert_eq!(ingress_ip(&status), "10.1.0.6");
        assert_eq!(cloud.load_balancers().len(), 1);

        let mut other = svc("other", "uid-2");
        for (ip, why) in [
            ("10.1.0.6", "already used"),
            ("10.9.9.9", "not in the load balancer IP pool"),
            ("ten", "not an IP address"),
        ] {
            other.spec.as_mut().unwrap().load_balancer_ip = Some(ip.into());
            let err = cloud
                .ensure_load_balancer("k", &other, &[])
                .await
                .unwrap_err();
            assert!(err.to_string().contains(why), "{ip}: {err}");
        }
        assert!(cloud.lb_for("default/other").is_none());
        other.spec.as_mut().unwrap().load_balancer_ip = Some("10.1.0.5".into());
        let status = cloud.ensure_load_balancer("k", &other, &[]).await.unwrap();
        assert_eq!(ingress_ip(&status), "10.1.0.5", "freed by the move above");
    }

    #[tokio::test]
    async fn first_ip_family_picks_the_address_family() {
        let cloud = FakeCloud::builder()
            .lb_pool_cidr("10.1.0.0/30")
            .lb_pool_cidr("2001:db8::/120")
            .build()
            .unwrap();
        let mut v6 = svc("v6", "uid-6");
        v6.spec.as_mut().unwrap().ip_families = Some(vec!["IPv6".into(), "IPv4".into()]);
        let status = cloud.ensure_load_balancer("k", &v6, &[]).await.unwrap();
        assert_eq!(ingress_ip(&status), "2001:db8::1");
        let mut v4 = svc("v4", "uid-4");
        v4.spec.as_mut().unwrap().ip_families = Some(vec!["IPv4".into()]);
        let status = cloud.ensure_load_balancer("k", &v4, &[]).await.unwrap();
        assert_eq!(ingress_ip(&status), "10.1.0.1");

        let only_v4 = FakeCloud::builder()
            .lb_pool_cidr("10.1.0.0/30")
            .build()
            .unwrap();
        let err = only_v4
            .ensure_load_balancer("k", &v6, &[])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("exhausted for IPv6"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_ensures_get_distinct_addresses() {
        let cloud = FakeCloud::builder()
            .lb_pool_cidr("10.2.0.0/26")
            .build()
            .unwrap();
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let cloud = cloud.clone();
                tokio::spawn(async move {
                    let s = svc(&format!("s{i}"), &format!("uid-{i}"));
                    cloud.ensure_load_balancer("k", &s, &[]).await
                })
            })
            .collect();
        let mut ips = BTreeSet::new();
        for task in tasks {
            let status = task.await.unwrap().unwrap();
            ips.insert(ingress_ip(&status).to_owned());
        }
        assert_eq!(ips.len(), 40);
        assert_eq!(cloud.calls_to(Method::EnsureLoadBalancer).len(), 40);
    }
}
