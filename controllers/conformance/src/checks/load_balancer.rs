//! Checks of the `LoadBalancer` facet as the service controller drives it: ensure (again after
//! every restart), get (before deleting), update the hosts, delete (until it succeeds), and the
//! name it logs. Each check deletes the fixture Service's load balancer when it ends.

use std::sync::Arc;

use cloud_controllers::cloud::{CloudProvider, LoadBalancer};
use cloud_controllers::service::service_key;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

use super::vocabulary::{Check, Verdict, answer, called, check, expect, facet, passed};
use crate::fixture::Fixture;
use crate::report::Failure;

pub(super) const CHECKS: &[Check] = &[
    check!(
        get_load_balancer_is_none_before_ensure,
        LoadBalancer,
        "cloud.go LoadBalancer.GetLoadBalancer: exists=false (here Ok(None)) when no load \
         balancer was made for the Service, not an error and not an empty status"
    ),
    check!(
        ensure_load_balancer_returns_an_ingress,
        LoadBalancer,
        "cloud.go LoadBalancer.EnsureLoadBalancer: on success, the status of the balancer (a nil \
         status is an error to the service controller); it becomes status.loadBalancer, so it \
         holds an ingress with an IP address or a hostname"
    ),
    check!(
        ensure_load_balancer_is_idempotent,
        LoadBalancer,
        "cloud.go LoadBalancer.EnsureLoadBalancer: creates the load balancer or updates the \
         existing one; the service controller calls it again on every change, retry and restart, \
         and each call must keep the Service's address"
    ),
    check!(
        get_load_balancer_reports_an_ensured_load_balancer,
        LoadBalancer,
        "cloud.go LoadBalancer.GetLoadBalancer: exists=true with the balancer's status once \
         EnsureLoadBalancer made it (the service controller deletes only load balancers it \
         reports)"
    ),
    check!(
        update_load_balancer_succeeds_on_an_existing_load_balancer,
        LoadBalancer,
        "cloud.go LoadBalancer.UpdateLoadBalancer: updates the hosts of an existing load \
         balancer (called when the set of eligible Nodes changes)"
    ),
    check!(
        get_load_balancer_is_none_after_ensure_load_balancer_deleted,
        LoadBalancer,
        "cloud.go LoadBalancer.EnsureLoadBalancerDeleted: deletes the load balancer, after which \
         GetLoadBalancer reports exists=false"
    ),
    check!(
        ensure_load_balancer_deleted_succeeds_when_already_gone,
        LoadBalancer,
        "cloud.go LoadBalancer.EnsureLoadBalancerDeleted: returns nil if the load balancer did \
         not exist (deleted before, or never made): the service.kubernetes.io/load-balancer-cleanup \
         finalizer waits for it, and it must not return ImplementedElsewhere"
    ),
    check!(
        load_balancer_name_is_stable,
        LoadBalancer,
        "cloud.go LoadBalancer.GetLoadBalancerName: a deterministic name for the Service's load \
         balancer (as DefaultLoadBalancerName derives it from the UID): the same on every call \
         and after the Service's spec changes"
    ),
    check!(
        load_balancer_names_differ_between_services,
        LoadBalancer,
        "cloud.go LoadBalancer.GetLoadBalancerName: two Services never share a load balancer \
         name (DefaultLoadBalancerName: one per Service UID)"
    ),
];

/// The hosts the checks balance to: the fixture's running instance.
fn hosts(f: &Fixture) -> Vec<Arc<Node>> {
    vec![Arc::new(f.existing.node())]
}

/// `EnsureLoadBalancer` of the fixture Service, which must succeed.
async fn ensure(lb: &dyn LoadBalancer, f: &Fixture) -> Result<LoadBalancerStatus, Failure> {
    let call = format!("EnsureLoadBalancer({})", service_key(&f.service));
    called(
        &call,
        lb.ensure_load_balancer(&f.cluster_name, &f.service, &hosts(f))
            .await,
    )
}

/// Runs `body` on the load-balancer facet, then deletes the fixture Service's load balancer,
/// whatever `body` found.
async fn balancing<'a, F, Fut>(p: &'a dyn CloudProvider, f: &'a Fixture, body: F) -> Verdict
where
    F: FnOnce(&'a dyn LoadBalancer) -> Fut,
    Fut: std::future::Future<Output = Verdict>,
{
    let lb = load_balancer(p)?;
    let verdict = body(lb).await;
    let _ = lb
        .ensure_load_balancer_deleted(&f.cluster_name, &f.service)
        .await;
    verdict
}

fn load_balancer(p: &dyn CloudProvider) -> Result<&dyn LoadBalancer, Failure> {
    facet(p.load_balancer(), "load_balancer()")
}

pub(super) async fn get_load_balancer_is_none_before_ensure(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let lb = load_balancer(p)?;
    let reply = lb.get_load_balancer(&f.cluster_name, &f.service).await;
    expect(
        matches!(reply, Ok(None)),
        format!(
            "GetLoadBalancer({}) before any EnsureLoadBalancer to be Ok(None)",
            service_key(&f.service)
        ),
        answer(&reply),
    )?;
    passed()
}

pub(super) async fn ensure_load_balancer_returns_an_ingress(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    balancing(p, f, |lb| async move {
        let status = ensure(lb, f).await?;
        let ingress = status.ingress.clone().unwrap_or_default();
        let usable = |i: &k8s_openapi::api::core::v1::LoadBalancerIngress| {
            let ip = i.ip.as_deref().filter(|ip| !ip.is_empty());
            let hostname = i.hostname.as_deref().filter(|h| !h.is_empty());
            ip.is_none_or(|ip| ip.parse::<std::net::IpAddr>().is_ok())
                && (ip.is_some() || hostname.is_some())
        };
        expect(
            !ingress.is_empty() && ingress.iter().all(usable),
            format!(
                "EnsureLoadBalancer({}) to return ingress entries, each with an IP address or a hostname",
                service_key(&f.service)
            ),
            &status,
        )?;
        passed()
    })
    .await
}

pub(super) async fn ensure_load_balancer_is_idempotent(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    balancing(p, f, |lb| async move {
        let first = ensure(lb, f).await?;
        let again = ensure(lb, f).await?;
        expect(
            again == first,
            format!(
                "EnsureLoadBalancer({}) called again to return the same status, {first:?}",
                service_key(&f.service)
            ),
            &again,
        )?;
        passed()
    })
    .await
}

pub(super) async fn get_load_balancer_reports_an_ensured_load_balancer(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    balancing(p, f, |lb| async move {
        let ensured = ensure(lb, f).await?;
        let call = format!("GetLoadBalancer({})", service_key(&f.service));
        let got = called(
            &call,
            lb.get_load_balancer(&f.cluster_name, &f.service).await,
        )?;
        let same_ingress = got.as_ref().is_some_and(|s| s.ingress == ensured.ingress);
        expect(
            same_ingress,
            format!("{call} after EnsureLoadBalancer to be Some with its ingress, {ensured:?}"),
            &got,
        )?;
        passed()
    })
    .await
}

pub(super) async fn update_load_balancer_succeeds_on_an_existing_load_balancer(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    balancing(p, f, |lb| async move {
        ensure(lb, f).await?;
        let call = format!(
            "UpdateLoadBalancer({}) of an ensured load balancer",
            service_key(&f.service)
        );
        called(
            &call,
            lb.update_load_balancer(&f.cluster_name, &f.service, &hosts(f))
                .await,
        )?;
        let call = format!(
            "UpdateLoadBalancer({}) to no hosts",
            service_key(&f.service)
        );
        called(
            &call,
            lb.update_load_balancer(&f.cluster_name, &f.service, &[])
                .await,
        )?;
        passed()
    })
    .await
}

pub(super) async fn get_load_balancer_is_none_after_ensure_load_balancer_deleted(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    balancing(p, f, |lb| async move {
        ensure(lb, f).await?;
        let key = service_key(&f.service);
        let call = format!("EnsureLoadBalancerDeleted({key})");
        called(
            &call,
            lb.ensure_load_balancer_deleted(&f.cluster_name, &f.service)
                .await,
        )?;
        let reply = lb.get_load_balancer(&f.cluster_name, &f.service).await;
        expect(
            matches!(reply, Ok(None)),
            format!("GetLoadBalancer({key}) after EnsureLoadBalancerDeleted to be Ok(None)"),
            answer(&reply),
        )?;
        passed()
    })
    .await
}

pub(super) async fn ensure_load_balancer_deleted_succeeds_when_already_gone(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let lb = load_balancer(p)?;
    let key = service_key(&f.service);
    let never = lb
        .ensure_load_balancer_deleted(&f.cluster_name, &f.service)
        .await;
    expect(
        never.is_ok(),
        format!("EnsureLoadBalancerDeleted({key}) of a load balancer never made to be Ok(())"),
        answer(&never),
    )?;
    ensure(lb, f).await?;
    let first = lb
        .ensure_load_balancer_deleted(&f.cluster_name, &f.service)
        .await;
    let again = lb
        .ensure_load_balancer_deleted(&f.cluster_name, &f.service)
        .await;
    expect(
        first.is_ok() && again.is_ok(),
        format!("EnsureLoadBalancerDeleted({key}), twice, to be Ok(()) both times"),
        (answer(&first), answer(&again)),
    )?;
    passed()
}

/// The fixture Service after a spec change (another port): the same Service to a provider.
fn changed_spec(svc: &Service) -> Service {
    let mut changed = svc.clone();
    if let Some(port) = changed
        .spec
        .iter_mut()
        .flat_map(|s| s.ports.iter_mut().flatten())
        .next()
    {
        port.port += 8000;
    }
    changed
}

/// Another Service in the fixture Service's namespace: other name, other UID.
fn other_service(svc: &Service) -> Service {
    let mut other = svc.clone();
    let name = other.metadata.name.as_deref().unwrap_or_default();
    other.metadata.name = Some(format!("{name}-other"));
    let uid = other.metadata.uid.as_deref().unwrap_or_default();
    // A fixed UID differing in its first characters, since names are often cut from the UID.
    let fresh = [
        "c0ffee00-0000-4000-8000-00000000c0de",
        "deadbeef-0000-4000-8000-00000000c0de",
    ];
    other.metadata.uid = fresh.iter().find(|u| **u != uid).map(|u| (*u).to_owned());
    other
}

pub(super) async fn load_balancer_name_is_stable(p: &dyn CloudProvider, f: &Fixture) -> Verdict {
    let lb = load_balancer(p)?;
    let key = service_key(&f.service);
    let name = lb.get_load_balancer_name(&f.cluster_name, &f.service);
    expect(
        !name.is_empty(),
        format!("GetLoadBalancerName({key}) to be non-empty"),
        &name,
    )?;
    let again = lb.get_load_balancer_name(&f.cluster_name, &f.service);
    expect(
        again == name,
        format!("GetLoadBalancerName({key}) called again to be {name:?}"),
        &again,
    )?;
    let changed = lb.get_load_balancer_name(&f.cluster_name, &changed_spec(&f.service));
    expect(
        changed == name,
        format!("GetLoadBalancerName({key}) after a change of its ports to be {name:?}"),
        &changed,
    )?;
    passed()
}

pub(super) async fn load_balancer_names_differ_between_services(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let lb = load_balancer(p)?;
    let other = other_service(&f.service);
    let name = lb.get_load_balancer_name(&f.cluster_name, &f.service);
    let other_name = lb.get_load_balancer_name(&f.cluster_name, &other);
    expect(
        other_name != name,
        format!(
            "GetLoadBalancerName({}) to differ from GetLoadBalancerName({})'s {name:?}",
            service_key(&other),
            service_key(&f.service)
        ),
        &other_name,
    )?;
    passed()
}
