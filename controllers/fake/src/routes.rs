//! The fake's `Routes` and `Clusters` facets.
//!
//! Routes live per cluster name and are unique by destination CIDR, as in a VPC route table:
//! creating a second route to the same CIDR fails. A created route is named
//! `<cluster>-<nameHint>-<cidr>` (non-alphanumerics of the CIDR become `-`), so dual-stack nodes
//! get one route per family. `DeleteRoute` removes the route of that name (or, for a hand-built
//! route without a name, of that CIDR) and succeeds when it is already gone. Tests seed stale or
//! blackholed routes with [`FakeCloud::add_route`] / [`FakeCloud::set_route_blackhole`].
//!
//! Call-log keys: the cluster name for `ListRoutes` and `Master`, the target node name for
//! `CreateRoute` / `DeleteRoute`, empty for `ListClusters`.

use async_trait::async_trait;

use super::{FakeCloud, Method};
use cloud_controllers::cloud::{CloudError, Clusters, Route, Routes};

fn route_name(cluster_name: &str, name_hint: &str, cidr: &str) -> String {
    let cidr: String = cidr
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{cluster_name}-{name_hint}-{cidr}")
}

#[async_trait]
impl Routes for FakeCloud {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        self.call(Method::ListRoutes, cluster_name, |w| {
            Ok(w.routes(cluster_name))
        })
        .await
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        self.call(Method::CreateRoute, route.target_node.as_str(), |w| {
            if let Some(existing) = w.route_by_cidr(cluster_name, &route.destination_cidr) {
                return Err(CloudError::other(format!(
                    "a route to {} already exists (target node {:?})",
                    route.destination_cidr, existing.target_node
                )));
            }
            let created = Route {
                name: route_name(cluster_name, name_hint, &route.destination_cidr),
                blackhole: false,
                ..route.clone()
            };
            w.put_route(cluster_name, created);
            Ok(())
        })
        .await
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        self.call(Method::DeleteRoute, route.target_node.as_str(), |w| {
            let name = if route.name.is_empty() {
                w.route_by_cidr(cluster_name, &route.destination_cidr)
                    .map(|r| r.name.clone())
                    .unwrap_or_default()
            } else {
                route.name.clone()
            };
            if !w.remove_route(cluster_name, &name) {
                tracing::debug!(cluster_name, route = %name, "fake cloud: route already gone");
            }
            Ok(())
        })
        .await
    }
}

#[async_trait]
impl Clusters for FakeCloud {
    async fn list_clusters(&self) -> Result<Vec<String>, CloudError> {
        self.call(Method::ListClusters, "", |w| Ok(w.cluster_names()))
            .await
    }

    async fn master(&self, cluster_name: &str) -> Result<String, CloudError> {
        self.call(Method::Master, cluster_name, |w| {
            w.cluster_master(cluster_name)
                .map(str::to_owned)
                .ok_or_else(|| CloudError::other(format!("cluster {cluster_name:?} not found")))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FaultSpec;

    fn route(node: &str, cidr: &str) -> Route {
        Route {
            target_node: node.into(),
            destination_cidr: cidr.into(),
            ..Route::default()
        }
    }

    #[tokio::test]
    async fn create_list_delete_per_cluster() {
        let cloud = FakeCloud::new();
        cloud
            .create_route("k1", "uid-1", &route("n1", "10.244.1.0/24"))
            .await
            .unwrap();
        cloud
            .create_route("k1", "uid-1", &route("n1", "fd00:1::/64"))
            .await
            .unwrap();
        cloud
            .create_route("k2", "uid-2", &route("n2", "10.244.2.0/24"))
            .await
            .unwrap();

        let routes = cloud.list_routes("k1").await.unwrap();
        assert_eq!(routes.len(), 2);
        assert_eq!(routes[0].name, "k1-uid-1-10-244-1-0-24");
        assert_eq!(routes[1].name, "k1-uid-1-fd00-1---64");
        assert_eq!(cloud.list_routes("k2").await.unwrap().len(), 1);
        assert!(cloud.list_routes("other").await.unwrap().is_empty());

        cloud.delete_route("k1", &routes[0]).await.unwrap();
        cloud.delete_route("k1", &routes[0]).await.unwrap();
        assert_eq!(cloud.route_table("k1"), vec![routes[1].clone()]);
    }

    #[tokio::test]
    async fn duplicate_destination_is_an_error() {
        let cloud = FakeCloud::new();
        cloud
            .create_route("k", "u1", &route("n1", "10.0.0.0/24"))
            .await
            .unwrap();
        let err = cloud
            .create_route("k", "u2", &route("n2", "10.0.0.0/24"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
    }

    #[tokio::test]
    async fn seeded_and_blackholed_routes_are_listed() {
        let cloud = FakeCloud::new();
        cloud.add_route(
            "k",
            Route {
                name: "stale".into(),
                ..route("gone-node", "10.0.9.0/24")
            },
        );
        assert!(cloud.set_route_blackhole("k", "10.0.9.0/24", true));
        assert!(!cloud.set_route_blackhole("k", "10.0.8.0/24", true));
        let routes = cloud.list_routes("k").await.unwrap();
        assert!(routes[0].blackhole);
        // A route without a name is deleted by its CIDR.
        cloud
            .delete_route("k", &route("gone-node", "10.0.9.0/24"))
            .await
            .unwrap();
        assert!(cloud.route_table("k").is_empty());
    }

    #[tokio::test]
    async fn route_calls_are_keyed_by_target_node_and_faults_apply() {
        let cloud = FakeCloud::new();
        cloud.fail(
            Method::CreateRoute,
            FaultSpec::other("quota").only_for("n2"),
        );
        cloud
            .create_route("k", "u1", &route("n1", "10.0.1.0/24"))
            .await
            .unwrap();
        assert!(
            cloud
                .create_route("k", "u2", &route("n2", "10.0.2.0/24"))
                .await
                .is_err()
        );
        let calls = cloud.calls_to(Method::CreateRoute);
        assert_eq!(
            calls.iter().map(|c| c.key.as_str()).collect::<Vec<_>>(),
            vec!["n1", "n2"]
        );
        assert_eq!(cloud.route_table("k").len(), 1);
    }

    #[tokio::test]
    async fn clusters_facet_lists_and_resolves_masters() {
        let cloud = FakeCloud::builder()
            .cluster("k", "10.0.0.10")
            .build()
            .unwrap();
        assert_eq!(cloud.list_clusters().await.unwrap(), vec!["k"]);
        assert_eq!(cloud.master("k").await.unwrap(), "10.0.0.10");
        assert!(cloud.master("nope").await.is_err());
    }
}
