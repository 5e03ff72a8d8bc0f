//! [`AddressPools`]: the static-inventory provider's LoadBalancer facet once the address-pool
//! controller runs. It hands each LoadBalancer Service one ingress IP from the `AddressPool`s,
//! reading pools and Services from the process's shared informers (attached by the controller's
//! initializer), so it costs no watch of its own.
//!
//! Choice of address, in order: the one it already holds; else one its status (after a restart)
//! or its `spec.loadBalancerIP` names, if free and in an eligible pool; else the first free one of
//! the eligible pools in name order. Eligible: the pool the `metal.example.com/address-pool`
//! annotation names, or else every pool with `assignment: Automatic`; never an overlapping or invalid
//! pool. "Free" means no other Service holds it, in this process's assignments or in any
//! Service's status, so assignments survive restarts without a database.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use cloud_controllers::cloud::CloudError;
use cloud_controllers::service::service_key;
use controller_manager::informer::Store;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;

use super::resource::{AddressPool, AddressRange, POOL_ANNOTATION, usable};
use crate::ip_balancer::{Assignments, IpBalancer, IpSource, ingress_ips, requested_ips};

/// Shared between the provider (which allocates) and the address-pool controller (which attaches
/// the informer stores and reports the counts). Cheap to clone.
pub type AddressPools = Arc<IpBalancer<PoolStores>>;

/// The informer stores an [`AddressPools`] allocates from, once the controller attached them.
#[derive(Default)]
pub struct PoolStores(OnceLock<(Store<AddressPool>, Store<Service>)>);

impl IpBalancer<PoolStores> {
    /// Starts allocating from the pools in `pools`, with `services` telling which addresses are
    /// taken. Called once by the controller's initializer; later calls are ignored.
    pub fn attach(&self, pools: Store<AddressPool>, services: Store<Service>) {
        let _ = self.source().0.set((pools, services));
    }

    /// Whether the address-pool controller attached the stores (it runs in this process).
    pub fn is_attached(&self) -> bool {
        self.source().0.get().is_some()
    }
}

impl IpSource for PoolStores {
    fn choose(&self, svc: &Service, assigned: &Assignments) -> Result<IpAddr, CloudError> {
        let Some((pools, services)) = self.0.get() else {
            return Err(CloudError::other(
                "the address-pool controller is not running: add it to --controllers",
            ));
        };
        choose(svc, &pools.list(), &services.list(), assigned)
    }

    /// The address in the Service's status, if a usable pool holds it.
    fn adopt(&self, svc: &Service) -> Option<IpAddr> {
        let all = self.0.get()?.0.list();
        let in_a_pool = |ip: &IpAddr| {
            all.iter()
                .any(|p| usable(p, &all).is_ok_and(|ranges| ranges.iter().any(|r| r.contains(*ip))))
        };
        ingress_ips(svc).into_iter().find(in_a_pool)
    }
}

/// The address `svc` should hold, given every pool, every Service and this process's assignments.
fn choose(
    svc: &Service,
    pools: &[Arc<AddressPool>],
    services: &[Arc<Service>],
    assigned: &Assignments,
) -> Result<IpAddr, CloudError> {
    let key = service_key(svc);
    let eligible = eligible(svc, &key, pools)?;
    if let Some(ip) = assigned.get(&key)
        && eligible.iter().any(|(_, r)| r.contains(*ip))
    {
        return Ok(*ip);
    }
    let others = services.iter().filter(|s| service_key(s) != key);
    let taken: BTreeSet<IpAddr> = others
        .flat_map(|s| ingress_ips(s))
        .chain(
            assigned
                .iter()
                .filter(|(k, _)| **k != key)
                .map(|(_, ip)| *ip),
        )
        .collect();
    let free = |ip: &IpAddr| !taken.contains(ip) && eligible.iter().any(|(_, r)| r.contains(*ip));
    let wanted = requested_ips(svc).find(|ip| free(ip));
    wanted
        .or_else(|| eligible.iter().flat_map(|(_, r)| r.iter()).find(|ip| free(ip)))
        .ok_or_else(|| {
            let names: BTreeSet<&str> = eligible.iter().map(|(n, _)| n.as_str()).collect();
            CloudError::other(format!(
                "no free address in address pool(s) {names:?}: add addresses to a pool or delete a LoadBalancer Service"
            ))
        })
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
        None => sorted.into_iter().filter(|p| p.is_automatic()).collect(),
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
            "no usable AddressPool with assignment: Automatic: create one, or name one with the metal.example.com/address-pool annotation",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use cloud_controllers::cloud::LoadBalancer;
    use serde_json::json;

    use super::*;

    fn pool(name: &str, created: &str, range: (&str, &str), automatic: bool) -> Arc<AddressPool> {
        let assignment = if automatic { "Automatic" } else { "Manual" };
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "metal.example.com/v1", "kind": "AddressPool",
                "metadata": {"name": name, "creationTimestamp": created},
                "spec": {"ranges": [{"start": range.0, "end": range.1}], "assignment": assignment},
            }))
            .unwrap(),
        )
    }

    fn svc(name: &str, pool: Option<&str>, status_ip: Option<&str>) -> Arc<Service> {
        let ingress: Vec<_> = status_ip.iter().map(|ip| json!({"ip": ip})).collect();
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default", "annotations": pool.map(|p| json!({POOL_ANNOTATION: p}))},
                "spec": {"type": "LoadBalancer"},
                "status": {"loadBalancer": {"ingress": ingress}},
            }))
            .unwrap(),
        )
    }

    fn pools() -> Vec<Arc<AddressPool>> {
        vec![
            pool(
                "a",
                "2026-01-01T00:00:00Z",
                ("192.0.2.0", "192.0.2.1"),
                true,
            ),
            pool(
                "b",
                "2026-01-02T00:00:00Z",
                ("198.51.100.7", "198.51.100.7"),
                false,
            ),
            pool(
                "c",
                "2026-01-03T00:00:00Z",
                ("192.0.2.1", "192.0.2.5"),
                true,
            ),
        ]
    }

    fn pick(s: &Arc<Service>, services: &[Arc<Service>]) -> Result<String, String> {
        choose(s, &pools(), services, &Assignments::new())
            .map(|ip| ip.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn addresses_come_from_the_right_pool_and_are_never_shared() {
        let web = svc("web", None, None);
        assert_eq!(pick(&web, &[]).unwrap(), "192.0.2.0");
        // Taken by another Service's status: the next one; the overlapping pool c is never used.
        let other = svc("other", None, Some("192.0.2.0"));
        assert_eq!(
            pick(&web, std::slice::from_ref(&other)).unwrap(),
            "192.0.2.1"
        );
        let third = svc("third", None, Some("192.0.2.1"));
        let full = pick(&web, &[other, third]).unwrap_err();
        assert!(
            full.contains("no free address in address pool(s) {\"a\"}"),
            "{full}"
        );
        // Adopted from its own status after a restart; by annotation from a non-auto pool.
        assert_eq!(
            pick(&svc("web", None, Some("192.0.2.1")), &[]).unwrap(),
            "192.0.2.1"
        );
        assert_eq!(
            pick(&svc("api", Some("b"), None), &[]).unwrap(),
            "198.51.100.7"
        );
    }

    #[test]
    fn bad_pool_choices_say_what_to_fix() {
        let missing = pick(&svc("s", Some("nope"), None), &[]).unwrap_err();
        assert!(
            missing.contains("asks for AddressPool \"nope\"")
                && missing.contains("create it or fix the annotation"),
            "{missing}"
        );
        let refused = pick(&svc("s", Some("c"), None), &[]).unwrap_err();
        assert!(
            refused.contains("hands out no addresses") && refused.contains("Overlapping"),
            "{refused}"
        );
        let none = choose(&svc("s", None, None), &[], &[], &Assignments::new()).unwrap_err();
        assert!(
            none.to_string()
                .contains("no usable AddressPool with assignment: Automatic"),
            "{none}"
        );
    }

    #[tokio::test]
    async fn without_the_controller_the_facet_says_to_enable_it() {
        let pools = AddressPools::default();
        let err = pools
            .ensure_load_balancer("k", &svc("s", None, None), &[])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("add it to --controllers"), "{err}");
        assert!(
            pools
                .get_load_balancer("k", &svc("s", None, None))
                .await
                .unwrap()
                .is_none()
        );
    }
}
