//! Checks of the `Routes` facet as the route controller drives it: it lists the cluster's routes,
//! creates the missing ones (retrying after errors) and deletes those it no longer wants, passing
//! back what it listed. Each check deletes its routes (those to the fixture's CIDRs) when it ends.

use cloud_controllers::cloud::{CloudProvider, Route, Routes};

use super::vocabulary::{Check, Verdict, answer, called, check, expect, facet, passed, skipped};
use crate::fixture::Fixture;
use crate::report::Failure;

pub(super) const CHECKS: &[Check] = &[
    check!(
        created_route_is_listed,
        Routes,
        "cloud.go Routes.CreateRoute / ListRoutes: a created route (one per pod CIDR of a Node, \
         so two for a dual-stack Node) is listed for the cluster with its target node and \
         destination CIDR, else the route controller creates it again on every sync"
    ),
    check!(
        create_route_retry_leaves_one_route,
        Routes,
        "route controller: it retries a CreateRoute whose answer it did not get; a second \
         CreateRoute of a listed route (whether it succeeds or fails) must not leave two routes \
         to one CIDR"
    ),
    check!(
        deleted_route_is_not_listed,
        Routes,
        "cloud.go Routes.DeleteRoute: deletes the route ListRoutes returned, which is then no \
         longer listed"
    ),
    check!(
        delete_route_succeeds_when_already_gone,
        Routes,
        "route controller (derived): a route it listed may be gone by the time it deletes it \
         (another sync or a restart did); DeleteRoute of an absent route succeeds, as \
         EnsureLoadBalancerDeleted does, instead of failing the sync"
    ),
    check!(
        routes_are_listed_per_cluster,
        Routes,
        "cloud.go Routes.ListRoutes: lists the routes that belong to the given clusterName only \
         (another cluster's route controller must never see, and delete, them)"
    ),
];

/// The name hint the route controller passes: the target Node's UID.
const NAME_HINT: &str = "c0ffee00-0000-4000-8000-0000000000a1";

fn route_to(f: &Fixture, cidr: &str) -> Route {
    Route {
        target_node: f.existing.node_name.clone(),
        destination_cidr: cidr.to_owned(),
        ..Route::default()
    }
}

/// The listed routes to `cidr`.
async fn listed(routes: &dyn Routes, cluster: &str, cidr: &str) -> Result<Vec<Route>, Failure> {
    let all = called(
        &format!("ListRoutes({cluster:?})"),
        routes.list_routes(cluster).await,
    )?;
    Ok(all
        .into_iter()
        .filter(|r| r.destination_cidr == cidr)
        .collect())
}

/// Deletes every listed route to a fixture CIDR, so each check starts and ends without one.
async fn clear(routes: &dyn Routes, f: &Fixture) {
    for route in routes
        .list_routes(&f.cluster_name)
        .await
        .unwrap_or_default()
    {
        if f.route_cidrs.contains(&route.destination_cidr) {
            let _ = routes.delete_route(&f.cluster_name, &route).await;
        }
    }
}

/// Runs `body` on the routes facet and the first fixture CIDR between two [`clear`]s.
async fn with_routes<'a, F, Fut>(p: &'a dyn CloudProvider, f: &'a Fixture, body: F) -> Verdict
where
    F: FnOnce(&'a dyn Routes, &'a str) -> Fut,
    Fut: std::future::Future<Output = Verdict>,
{
    let routes = facet(p.routes(), "routes()")?;
    let Some(cidr) = f.route_cidrs.first() else {
        return skipped("the fixture has no route CIDRs (Fixture::route_cidrs)");
    };
    clear(routes, f).await;
    let verdict = body(routes, cidr).await;
    clear(routes, f).await;
    verdict
}

/// `CreateRoute` to `cidr`, which must succeed.
async fn create(routes: &dyn Routes, f: &Fixture, cidr: &str) -> Result<(), Failure> {
    let call = format!(
        "CreateRoute({:?}, {cidr:?} via {:?})",
        f.cluster_name, f.existing.node_name
    );
    called(
        &call,
        routes
            .create_route(&f.cluster_name, NAME_HINT, &route_to(f, cidr))
            .await,
    )
}

pub(super) async fn created_route_is_listed(p: &dyn CloudProvider, f: &Fixture) -> Verdict {
    with_routes(p, f, |routes, _| async move {
        for cidr in &f.route_cidrs {
            create(routes, f, cidr).await?;
        }
        for cidr in &f.route_cidrs {
            let found = listed(routes, &f.cluster_name, cidr).await?;
            let right = found.len() == 1 && found[0].target_node == f.existing.node_name;
            expect(
                right,
                format!(
                    "ListRoutes({:?}) after CreateRoute to list one route to {cidr:?} targeting {:?}",
                    f.cluster_name, f.existing.node_name
                ),
                &found,
            )?;
        }
        passed()
    })
    .await
}

pub(super) async fn create_route_retry_leaves_one_route(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    with_routes(p, f, |routes, cidr| async move {
        create(routes, f, cidr).await?;
        let _ = routes
            .create_route(&f.cluster_name, NAME_HINT, &route_to(f, cidr))
            .await;
        let found = listed(routes, &f.cluster_name, cidr).await?;
        expect(
            found.len() == 1,
            format!(
                "ListRoutes({:?}) after CreateRoute of {cidr:?} twice to list one route to it",
                f.cluster_name
            ),
            &found,
        )?;
        passed()
    })
    .await
}

pub(super) async fn deleted_route_is_not_listed(p: &dyn CloudProvider, f: &Fixture) -> Verdict {
    with_routes(p, f, |routes, cidr| async move {
        create(routes, f, cidr).await?;
        for route in listed(routes, &f.cluster_name, cidr).await? {
            let call = format!("DeleteRoute({:?}, {route:?})", f.cluster_name);
            called(&call, routes.delete_route(&f.cluster_name, &route).await)?;
        }
        let found = listed(routes, &f.cluster_name, cidr).await?;
        expect(
            found.is_empty(),
            format!(
                "ListRoutes({:?}) after DeleteRoute of the route to {cidr:?} to list none to it",
                f.cluster_name
            ),
            &found,
        )?;
        passed()
    })
    .await
}

pub(super) async fn delete_route_succeeds_when_already_gone(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    with_routes(p, f, |routes, cidr| async move {
        create(routes, f, cidr).await?;
        let found = listed(routes, &f.cluster_name, cidr).await?;
        let Some(route) = found.first() else {
            return Err(Failure::new(
                format!(
                    "ListRoutes({:?}) after CreateRoute to list the route to {cidr:?}",
                    f.cluster_name
                ),
                "no such route",
            ));
        };
        let call = format!("DeleteRoute({:?}, {route:?})", f.cluster_name);
        called(&call, routes.delete_route(&f.cluster_name, route).await)?;
        let again = routes.delete_route(&f.cluster_name, route).await;
        expect(
            again.is_ok(),
            format!("{call} again, once the route is gone, to be Ok(())"),
            answer(&again),
        )?;
        passed()
    })
    .await
}

pub(super) async fn routes_are_listed_per_cluster(p: &dyn CloudProvider, f: &Fixture) -> Verdict {
    with_routes(p, f, |routes, cidr| async move {
        create(routes, f, cidr).await?;
        let other = format!("{}-other-cluster", f.cluster_name);
        let found = listed(routes, &other, cidr).await?;
        expect(
            found.is_empty(),
            format!(
                "ListRoutes({other:?}) to list no route CreateRoute made for cluster {:?}",
                f.cluster_name
            ),
            &found,
        )?;
        passed()
    })
    .await
}
