//! Mutation tests of the kit: the fake cloud wrapped in a provider that delegates everything but
//! breaks one rule. For every check there is a mutant breaking its rule, and the kit must fail
//! that mutant with that check, naming the rule; the faithful wrapper passes everything.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use cloud_controllers::cloud::{
    CloudError, CloudProvider, InstanceMetadata, Instances, InstancesV2, LoadBalancer, Route,
    Routes, Zone, Zones,
};
use cloud_provider_conformance::{Outcome, run};
use fake_cloud::FakeCloud;
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service,
};
use parking_lot::Mutex;

/// One broken rule each; `None` is the faithful wrapper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutation {
    None,
    EmptyProviderName,
    NotFoundByName,
    ExistsErrorsForDeleted,
    AlwaysShutdown,
    StoppedIsGone,
    UntypedAddresses,
    ProviderIdWithoutScheme,
    LooksUpByNameOnly,
    InstanceIdWithScheme,
    InstanceIdOtherError,
    ExistsByProviderIdErrorsForDeleted,
    StoppedIsGoneByProviderId,
    NoAddressesByProviderId,
    ZoneByNameDiffers,
    GetReportsEmptyStatus,
    EnsureWithoutIngress,
    EnsureNewIngressEachTime,
    GetForgetsEnsured,
    UpdateFails,
    DeleteKeepsLoadBalancer,
    DeleteOfAbsentFails,
    UnstableName,
    SharedName,
    ListDropsTarget,
    DuplicateRoutes,
    DeleteKeepsRoute,
    DeleteOfAbsentRouteFails,
    ListIgnoresCluster,
}

/// Each mutation and the check that must catch it.
const MUTANTS: &[(Mutation, &str)] = &[
    (
        Mutation::EmptyProviderName,
        "provider_name_is_a_usable_scheme",
    ),
    (
        Mutation::NotFoundByName,
        "instance_exists_for_a_running_instance",
    ),
    (
        Mutation::ExistsErrorsForDeleted,
        "instance_exists_is_false_not_an_error_for_a_deleted_instance",
    ),
    (
        Mutation::AlwaysShutdown,
        "instance_shutdown_is_false_for_a_running_instance",
    ),
    (
        Mutation::StoppedIsGone,
        "stopped_instance_exists_and_reports_shutdown",
    ),
    (
        Mutation::UntypedAddresses,
        "instance_metadata_describes_the_instance",
    ),
    (
        Mutation::ProviderIdWithoutScheme,
        "instance_metadata_provider_id_is_the_providers",
    ),
    (
        Mutation::LooksUpByNameOnly,
        "instance_lookup_prefers_the_provider_id",
    ),
    (
        Mutation::InstanceIdWithScheme,
        "instance_id_rebuilds_the_provider_id",
    ),
    (
        Mutation::InstanceIdOtherError,
        "instance_id_is_instance_not_found_for_a_deleted_instance",
    ),
    (
        Mutation::ExistsByProviderIdErrorsForDeleted,
        "instance_exists_by_provider_id_is_false_not_an_error_for_a_deleted_instance",
    ),
    (
        Mutation::StoppedIsGoneByProviderId,
        "stopped_instance_exists_by_provider_id_and_reports_shutdown",
    ),
    (
        Mutation::NoAddressesByProviderId,
        "node_addresses_agree_by_name_and_provider_id",
    ),
    (
        Mutation::ZoneByNameDiffers,
        "zone_agrees_by_name_and_provider_id",
    ),
    (
        Mutation::GetReportsEmptyStatus,
        "get_load_balancer_is_none_before_ensure",
    ),
    (
        Mutation::EnsureWithoutIngress,
        "ensure_load_balancer_returns_an_ingress",
    ),
    (
        Mutation::EnsureNewIngressEachTime,
        "ensure_load_balancer_is_idempotent",
    ),
    (
        Mutation::GetForgetsEnsured,
        "get_load_balancer_reports_an_ensured_load_balancer",
    ),
    (
        Mutation::UpdateFails,
        "update_load_balancer_succeeds_on_an_existing_load_balancer",
    ),
    (
        Mutation::DeleteKeepsLoadBalancer,
        "get_load_balancer_is_none_after_ensure_load_balancer_deleted",
    ),
    (
        Mutation::DeleteOfAbsentFails,
        "ensure_load_balancer_deleted_succeeds_when_already_gone",
    ),
    (Mutation::UnstableName, "load_balancer_name_is_stable"),
    (
        Mutation::SharedName,
        "load_balancer_names_differ_between_services",
    ),
    (Mutation::ListDropsTarget, "created_route_is_listed"),
    (
        Mutation::DuplicateRoutes,
        "create_route_retry_leaves_one_route",
    ),
    (Mutation::DeleteKeepsRoute, "deleted_route_is_not_listed"),
    (
        Mutation::DeleteOfAbsentRouteFails,
        "delete_route_succeeds_when_already_gone",
    ),
    (
        Mutation::ListIgnoresCluster,
        "routes_are_listed_per_cluster",
    ),
];

/// The fake cloud with one rule broken.
struct Mutant {
    cloud: FakeCloud,
    mutation: Mutation,
    calls: AtomicU32,
    /// Routes the `DuplicateRoutes` mutant created a second time: (cluster, route).
    duplicates: Mutex<Vec<(String, Route)>>,
}

impl Mutant {
    fn new(mutation: Mutation) -> (Self, cloud_provider_conformance::Fixture) {
        let (cloud, fixture) = support::fake_cloud();
        let mutant = Mutant {
            cloud,
            mutation,
            calls: AtomicU32::new(0),
            duplicates: Mutex::default(),
        };
        (mutant, fixture)
    }

    fn is(&self, mutation: Mutation) -> bool {
        self.mutation == mutation
    }

    /// `node` without its provider ID, for the mutant that ignores it.
    fn as_looked_up(&self, node: &Node) -> Node {
        let mut node = node.clone();
        if self.is(Mutation::LooksUpByNameOnly)
            && let Some(spec) = node.spec.as_mut()
        {
            spec.provider_id = None;
        }
        node
    }
}

impl CloudProvider for Mutant {
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        Some(self)
    }
    fn instances(&self) -> Option<&dyn Instances> {
        Some(self)
    }
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        Some(self)
    }
    fn zones(&self) -> Option<&dyn Zones> {
        Some(self)
    }
    fn routes(&self) -> Option<&dyn Routes> {
        Some(self)
    }
    fn provider_name(&self) -> &str {
        if self.is(Mutation::EmptyProviderName) {
            ""
        } else {
            self.cloud.provider_name()
        }
    }
    fn has_cluster_id(&self) -> bool {
        self.cloud.has_cluster_id()
    }
}

#[async_trait]
impl InstancesV2 for Mutant {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        let node = self.as_looked_up(node);
        let has_provider_id = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_ref())
            .is_some();
        let exists = self.cloud.instance_exists(&node).await?;
        match self.mutation {
            Mutation::NotFoundByName if !has_provider_id => Ok(false),
            Mutation::ExistsErrorsForDeleted if !exists => Err(CloudError::InstanceNotFound),
            Mutation::StoppedIsGone if self.cloud.instance_shutdown(&node).await? => Ok(false),
            _ => Ok(exists),
        }
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        let shutdown = self
            .cloud
            .instance_shutdown(&self.as_looked_up(node))
            .await?;
        Ok(shutdown || self.is(Mutation::AlwaysShutdown))
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        let mut metadata = self
            .cloud
            .instance_metadata(&self.as_looked_up(node))
            .await?;
        if let Some(md) = metadata.as_mut() {
            if self.is(Mutation::UntypedAddresses) {
                md.node_addresses
                    .iter_mut()
                    .for_each(|a| a.type_ = "Private".into());
            }
            if self.is(Mutation::ProviderIdWithoutScheme) {
                md.provider_id = md.provider_id.trim_start_matches("fake://").to_owned();
            }
        }
        Ok(metadata)
    }
}

#[async_trait]
impl Instances for Mutant {
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>, CloudError> {
        self.cloud.node_addresses(node_name).await
    }

    async fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<Vec<NodeAddress>, CloudError> {
        let addresses = self
            .cloud
            .node_addresses_by_provider_id(provider_id)
            .await?;
        Ok(if self.is(Mutation::NoAddressesByProviderId) {
            Vec::new()
        } else {
            addresses
        })
    }

    async fn instance_id(&self, node_name: &str) -> Result<String, CloudError> {
        match (self.cloud.instance_id(node_name).await, self.mutation) {
            (Ok(id), Mutation::InstanceIdWithScheme) => Ok(format!("fake://{id}")),
            (Err(CloudError::InstanceNotFound), Mutation::InstanceIdOtherError) => {
                Err(CloudError::other(format!("no instance {node_name}")))
            }
            (answer, _) => answer,
        }
    }

    async fn instance_type(&self, node_name: &str) -> Result<String, CloudError> {
        self.cloud.instance_type(node_name).await
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String, CloudError> {
        self.cloud.instance_type_by_provider_id(provider_id).await
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool, CloudError> {
        let exists = self
            .cloud
            .instance_exists_by_provider_id(provider_id)
            .await?;
        match self.mutation {
            Mutation::ExistsByProviderIdErrorsForDeleted if !exists => {
                Err(CloudError::InstanceNotFound)
            }
            Mutation::StoppedIsGoneByProviderId
                if self
                    .cloud
                    .instance_shutdown_by_provider_id(provider_id)
                    .await? =>
            {
                Ok(false)
            }
            _ => Ok(exists),
        }
    }

    async fn instance_shutdown_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<bool, CloudError> {
        self.cloud
            .instance_shutdown_by_provider_id(provider_id)
            .await
    }
}

#[async_trait]
impl Zones for Mutant {
    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone, CloudError> {
        self.cloud.get_zone_by_provider_id(provider_id).await
    }

    async fn get_zone_by_node_name(&self, node_name: &str) -> Result<Zone, CloudError> {
        let mut zone = self.cloud.get_zone_by_node_name(node_name).await?;
        if self.is(Mutation::ZoneByNameDiffers) {
            zone.failure_domain.push_str("-by-name");
        }
        Ok(zone)
    }
}

#[async_trait]
impl LoadBalancer for Mutant {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        svc: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let status = self.cloud.get_load_balancer(cluster_name, svc).await?;
        Ok(match self.mutation {
            Mutation::GetReportsEmptyStatus => Some(status.unwrap_or_default()),
            Mutation::GetForgetsEnsured => None,
            _ => status,
        })
    }

    fn get_load_balancer_name(&self, cluster_name: &str, svc: &Service) -> String {
        let name = self.cloud.get_load_balancer_name(cluster_name, svc);
        match self.mutation {
            Mutation::UnstableName => {
                format!("{name}-{}", self.calls.fetch_add(1, Ordering::Relaxed))
            }
            Mutation::SharedName => "the-load-balancer".to_owned(),
            _ => name,
        }
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        svc: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let mut status = self
            .cloud
            .ensure_load_balancer(cluster_name, svc, nodes)
            .await?;
        match self.mutation {
            Mutation::EnsureWithoutIngress => status = LoadBalancerStatus::default(),
            Mutation::EnsureNewIngressEachTime => {
                let n = self.calls.fetch_add(1, Ordering::Relaxed);
                status
                    .ingress
                    .get_or_insert_default()
                    .push(LoadBalancerIngress {
                        hostname: Some(format!("lb-{n}.example.com")),
                        ..LoadBalancerIngress::default()
                    });
            }
            _ => {}
        }
        Ok(status)
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        svc: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        if self.is(Mutation::UpdateFails) {
            return Err(CloudError::other("UpdateLoadBalancer is not implemented"));
        }
        self.cloud
            .update_load_balancer(cluster_name, svc, nodes)
            .await
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        svc: &Service,
    ) -> Result<(), CloudError> {
        match self.mutation {
            Mutation::DeleteKeepsLoadBalancer => Ok(()),
            Mutation::DeleteOfAbsentFails
                if self
                    .cloud
                    .get_load_balancer(cluster_name, svc)
                    .await?
                    .is_none() =>
            {
                Err(CloudError::other("load balancer not found"))
            }
            _ => {
                self.cloud
                    .ensure_load_balancer_deleted(cluster_name, svc)
                    .await
            }
        }
    }
}

#[async_trait]
impl Routes for Mutant {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        let cluster = if self.is(Mutation::ListIgnoresCluster) {
            support::CLUSTER
        } else {
            cluster_name
        };
        let mut routes = self.cloud.list_routes(cluster).await?;
        if self.is(Mutation::ListDropsTarget) {
            routes.iter_mut().for_each(|r| r.target_node.clear());
        }
        let duplicates = self.duplicates.lock();
        routes.extend(
            duplicates
                .iter()
                .filter(|(c, _)| c == cluster)
                .map(|(_, r)| r.clone()),
        );
        Ok(routes)
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        let listed = self.cloud.list_routes(cluster_name).await?;
        let existing = listed
            .into_iter()
            .find(|r| r.destination_cidr == route.destination_cidr);
        match existing {
            Some(existing) if self.is(Mutation::DuplicateRoutes) => {
                self.duplicates
                    .lock()
                    .push((cluster_name.to_owned(), existing));
                Ok(())
            }
            _ => {
                self.cloud
                    .create_route(cluster_name, name_hint, route)
                    .await
            }
        }
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        {
            let mut duplicates = self.duplicates.lock();
            if let Some(i) = duplicates
                .iter()
                .position(|(c, r)| c == cluster_name && r == route)
            {
                duplicates.remove(i);
                return Ok(());
            }
        }
        match self.mutation {
            Mutation::DeleteKeepsRoute => Ok(()),
            Mutation::DeleteOfAbsentRouteFails => {
                let listed = self.cloud.list_routes(cluster_name).await?;
                if !listed.iter().any(|r| r.name == route.name) {
                    return Err(CloudError::other(format!(
                        "route {:?} not found",
                        route.name
                    )));
                }
                self.cloud.delete_route(cluster_name, route).await
            }
            _ => self.cloud.delete_route(cluster_name, route).await,
        }
    }
}

#[tokio::test]
async fn the_faithful_wrapper_passes() {
    let (mutant, fixture) = Mutant::new(Mutation::None);
    run(&mutant, &fixture).await.assert_passed();
}

/// Every check has a mutant, and catches it, naming its rule and what the provider returned.
#[tokio::test]
async fn every_mutant_fails_the_check_named_after_its_rule() {
    let targets: Vec<&str> = MUTANTS.iter().map(|(_, check)| *check).collect();
    let checks: Vec<&str> = cloud_provider_conformance::checks()
        .map(|c| c.name)
        .collect();
    assert_eq!(targets, checks, "one mutant per check, in check order");

    let mut escaped = Vec::new();
    for (mutation, target) in MUTANTS {
        let (mutant, fixture) = Mutant::new(*mutation);
        let report = run(&mutant, &fixture).await;
        let entry = report.check(target).expect("the check ran");
        match &entry.outcome {
            Outcome::Failed(failure) => {
                let text = report.to_string();
                assert!(
                    text.contains(entry.rule),
                    "{mutation:?}: the report names no rule:\n{text}"
                );
                assert!(
                    !failure.expected.is_empty() && !failure.got.is_empty(),
                    "{mutation:?}: {failure:?}"
                );
            }
            other => escaped.push(format!(
                "{mutation:?} escaped {target}: {other:?}\n{report}"
            )),
        }
    }
    assert!(escaped.is_empty(), "{}", escaped.join("\n"));
}
