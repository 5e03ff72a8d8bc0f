//! The fake's instance facets: `InstancesV2` (what the node controllers use), and the legacy
//! `Instances` + `Zones` pair for testing the V1 path.
//!
//! Lookups follow real providers: `spec.providerID` first, else the node name. An instance in
//! state `gone` (or removed) does not exist: `InstanceExists` says false, the other lookups fail
//! with [`CloudError::InstanceNotFound`]. A `shutdown` instance still exists (upstream contract:
//! stopped VMs must report true) and reports shutdown. A `pending` instance exists but has no
//! metadata yet (`InstanceMetadata` returns `None`). [`FakeCloud::set_stale_reads`] makes the
//! next lookups of a running instance miss it, like the eventually consistent describe calls
//! behind the wrong-node-deletion incidents (kubernetes/kubernetes PR #127424).
//!
//! A node name the cloud never had (not configured, added or adopted) is an error, not "not
//! found", so a fake pointed at a real cluster neither initializes nor deletes Nodes it was not
//! told about; a removed instance is "not found". With `adoptUnknownNodes` (off unless `--dev`),
//! a lookup of an unknown node name (or `<provider>://<name>`) creates a running instance first,
//! so `--dev` initializes any cluster's Nodes.
//!
//! A provider ID of another cloud (`aws://...` on a cloud named `fake`) is an error, not "not
//! found", as real providers answer when they fail to parse it.
//!
//! Call-log keys: the node name for node- and name-based calls, the provider ID for
//! `*ByProviderID` calls.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, NodeAddress};

use super::{FakeCloud, InstanceState, Method};
use cloud_controllers::cloud::{CloudError, InstanceMetadata, Instances, InstancesV2, Zone, Zones};

fn node_name(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

#[async_trait]
impl InstancesV2 for FakeCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        self.call(Method::InstanceExists, node_name(node), |w| {
            w.check_node(node)?;
            Ok(w.lookup_node(node)?.is_some())
        })
        .await
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        self.call(Method::InstanceShutdown, node_name(node), |w| {
            w.check_node(node)?;
            w.lookup_node(node)?
                .map(|i| i.state == InstanceState::Shutdown)
                .ok_or(CloudError::InstanceNotFound)
        })
        .await
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        self.call(Method::InstanceMetadata, node_name(node), |w| {
            w.check_node(node)?;
            let report_provider_id = !w.metadata_without_provider_id;
            let i = w.lookup_node(node)?.ok_or(CloudError::InstanceNotFound)?;
            if i.state == InstanceState::Pending {
                return Ok(None);
            }
            Ok(Some(InstanceMetadata {
                provider_id: if report_provider_id {
                    i.provider_id.clone()
                } else {
                    String::new()
                },
                instance_type: i.instance_type.clone(),
                node_addresses: i.addresses.clone(),
                zone: i.zone.clone(),
                region: i.region.clone(),
                additional_labels: i.additional_labels.clone(),
            }))
        })
        .await
    }
}

#[async_trait]
impl Instances for FakeCloud {
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>, CloudError> {
        self.call(Method::NodeAddresses, node_name, |w| {
            w.lookup_name(node_name)?
                .map(|i| i.addresses.clone())
                .ok_or(CloudError::InstanceNotFound)
        })
        .await
    }

    async fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<Vec<NodeAddress>, CloudError> {
        self.call(Method::NodeAddressesByProviderID, provider_id, |w| {
            w.check_provider_id(provider_id)?;
            w.lookup_provider_id(provider_id)
                .map(|i| i.addresses.clone())
                .ok_or(CloudError::InstanceNotFound)
        })
        .await
    }

    /// The provider ID without its `<provider>://` prefix, so that upstream's
    /// `ProviderName() + "://" + InstanceID()` rebuilds the provider ID.
    async fn instance_id(&self, node_name: &str) -> Result<String, CloudError> {
        let prefix = format!("{}://", self.shared.provider_name);
        self.call(Method::InstanceID, node_name, |w| {
            let i = w
                .lookup_name(node_name)?
                .ok_or(CloudError::InstanceNotFound)?;
            Ok(i.provider_id
                .strip_prefix(&prefix)
                .unwrap_or(&i.provider_id)
                .to_owned())
        })
        .await
    }

    async fn instance_type(&self, node_name: &str) -> Result<String, CloudError> {
        self.call(Method::InstanceType, node_name, |w| {
            w.lookup_name(node_name)?
                .map(|i| i.instance_type.clone())
                .ok_or(CloudError::InstanceNotFound)
        })
        .await
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String, CloudError> {
        self.call(Method::InstanceTypeByProviderID, provider_id, |w| {
            w.check_provider_id(provider_id)?;
            w.lookup_provider_id(provider_id)
                .map(|i| i.instance_type.clone())
                .ok_or(CloudError::InstanceNotFound)
        })
        .await
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool, CloudError> {
        self.call(Method::InstanceExistsByProviderID, provider_id, |w| {
            w.check_provider_id(provider_id)?;
            Ok(w.lookup_provider_id(provider_id).is_some())
        })
        .await
    }

    async fn instance_shutdown_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<bool, CloudError> {
        self.call(Method::InstanceShutdownByProviderID, provider_id, |w| {
            w.check_provider_id(provider_id)?;
            w.lookup_provider_id(provider_id)
                .map(|i| i.state == InstanceState::Shutdown)
                .ok_or(CloudError::InstanceNotFound)
        })
        .await
    }
}

#[async_trait]
impl Zones for FakeCloud {
    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone, CloudError> {
        self.call(Method::GetZoneByProviderID, provider_id, |w| {
            w.check_provider_id(provider_id)?;
            w.lookup_provider_id(provider_id)
                .map(|i| Zone {
                    failure_domain: i.zone.clone(),
                    region: i.region.clone(),
                })
                .ok_or(CloudError::InstanceNotFound)
        })
        .await
    }

    async fn get_zone_by_node_name(&self, node_name: &str) -> Result<Zone, CloudError> {
        self.call(Method::GetZoneByNodeName, node_name, |w| {
            w.lookup_name(node_name)?
                .map(|i| Zone {
                    failure_domain: i.zone.clone(),
                    region: i.region.clone(),
                })
                .ok_or(CloudError::InstanceNotFound)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::node;
    use crate::{CallOutcome, FakeInstance, FaultSpec};

    fn cloud() -> FakeCloud {
        FakeCloud::builder()
            .instance(
                FakeInstance::new("node-1")
                    .instance_type("m1.large")
                    .zone("zone-a", "region-1")
                    .internal_ip("10.0.0.1")
                    .label("example.com/pool", "blue"),
            )
            .instance(FakeInstance::new("node-2").provider_id("fake://custom/vm-2"))
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn metadata_comes_from_the_instance_found_by_name() {
        let cloud = cloud();
        let md = cloud
            .instance_metadata(&node("node-1", None))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(md.provider_id, "fake://node-1");
        assert_eq!(md.instance_type, "m1.large");
        assert_eq!(
            (md.zone.as_str(), md.region.as_str()),
            ("zone-a", "region-1")
        );
        assert_eq!(md.node_addresses[0].address, "10.0.0.1");
        assert_eq!(md.additional_labels["example.com/pool"], "blue");
    }

    #[tokio::test]
    async fn provider_id_wins_over_node_name() {
        let cloud = cloud();
        // Node called node-1 but carrying node-2's provider ID: the provider ID decides.
        let md = cloud
            .instance_metadata(&node("node-1", Some("fake://custom/vm-2")))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(md.provider_id, "fake://custom/vm-2");
        // An unknown provider ID does not fall back to the name.
        let exists = cloud
            .instance_exists(&node("node-1", Some("fake://nope")))
            .await
            .unwrap();
        assert!(!exists);
    }

    #[tokio::test]
    async fn shutdown_instance_exists_and_reports_shutdown() {
        let cloud = cloud();
        cloud
            .set_instance_state("node-1", InstanceState::Shutdown)
            .unwrap();
        let n = node("node-1", Some("fake://node-1"));
        assert!(cloud.instance_exists(&n).await.unwrap());
        assert!(cloud.instance_shutdown(&n).await.unwrap());
        assert!(
            cloud
                .instance_exists_by_provider_id("fake://node-1")
                .await
                .unwrap()
        );
        assert!(
            cloud
                .instance_shutdown_by_provider_id("fake://node-1")
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn gone_instance_does_not_exist_and_lookups_say_not_found() {
        let cloud = cloud();
        cloud
            .set_instance_state("node-1", InstanceState::Gone)
            .unwrap();
        let n = node("node-1", None);
        assert!(!cloud.instance_exists(&n).await.unwrap());
        assert!(matches!(
            cloud.instance_metadata(&n).await,
            Err(CloudError::InstanceNotFound)
        ));
        assert!(matches!(
            cloud.instance_shutdown(&n).await,
            Err(CloudError::InstanceNotFound)
        ));
        assert!(matches!(
            cloud.instance_id("node-1").await,
            Err(CloudError::InstanceNotFound)
        ));
        assert!(
            !cloud
                .instance_exists_by_provider_id("fake://node-1")
                .await
                .unwrap()
        );
        cloud.remove_instance("node-2").unwrap();
        assert!(!cloud.instance_exists(&node("node-2", None)).await.unwrap());
    }

    #[tokio::test]
    async fn legacy_path_rebuilds_provider_id_and_reports_zone() {
        let cloud = cloud();
        let id = cloud.instance_id("node-1").await.unwrap();
        assert_eq!(
            format!(
                "{}://{id}",
                cloud_controllers::cloud::CloudProvider::provider_name(&cloud)
            ),
            "fake://node-1"
        );
        assert_eq!(cloud.instance_id("node-2").await.unwrap(), "custom/vm-2");
        assert_eq!(cloud.instance_type("node-1").await.unwrap(), "m1.large");
        assert_eq!(
            cloud
                .instance_type_by_provider_id("fake://node-1")
                .await
                .unwrap(),
            "m1.large"
        );
        assert_eq!(cloud.node_addresses("node-1").await.unwrap().len(), 1);
        assert_eq!(
            cloud
                .node_addresses_by_provider_id("fake://node-1")
                .await
                .unwrap()[0]
                .type_,
            "InternalIP"
        );
        let zone = cloud.get_zone_by_node_name("node-1").await.unwrap();
        assert_eq!(zone.failure_domain, "zone-a");
        let zone = cloud
            .get_zone_by_provider_id("fake://node-1")
            .await
            .unwrap();
        assert_eq!(zone.region, "region-1");
        // A name the cloud never had is an error, not "not found" (see the module docs).
        assert!(matches!(
            cloud.get_zone_by_node_name("nope").await,
            Err(CloudError::Other(_))
        ));
    }

    #[tokio::test]
    async fn address_changes_are_seen_by_the_next_call() {
        let cloud = cloud();
        cloud
            .set_instance_addresses(
                "node-1",
                vec![NodeAddress {
                    type_: "ExternalIP".into(),
                    address: "203.0.113.5".into(),
                }],
            )
            .unwrap();
        let md = cloud
            .instance_metadata(&node("node-1", None))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(md.node_addresses[0].address, "203.0.113.5");
        assert!(
            cloud
                .set_instance_state("typo", InstanceState::Gone)
                .is_err()
        );
    }

    #[tokio::test]
    async fn calls_are_logged_with_node_or_provider_id_keys() {
        let cloud = cloud();
        cloud.fail(
            Method::InstanceExists,
            FaultSpec::other("api down").times(1),
        );
        assert!(cloud.instance_exists(&node("node-1", None)).await.is_err());
        assert!(cloud.instance_exists(&node("node-1", None)).await.unwrap());
        cloud
            .instance_exists_by_provider_id("fake://node-1")
            .await
            .unwrap();
        let calls = cloud.calls();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[0].key, "node-1");
        assert_eq!(calls[0].outcome, CallOutcome::Err("api down".into()));
        assert!(calls[1].outcome.is_ok());
        assert_eq!(calls[2].method, Method::InstanceExistsByProviderID);
        assert_eq!(calls[2].key, "fake://node-1");
    }

    #[tokio::test]
    async fn stale_reads_hide_a_running_instance_for_n_lookups() {
        let cloud = cloud();
        cloud.set_stale_reads("node-1", 2).unwrap();
        let n = node("node-1", Some("fake://node-1"));
        assert!(!cloud.instance_exists(&n).await.unwrap());
        assert!(matches!(
            cloud.instance_type("node-1").await,
            Err(CloudError::InstanceNotFound)
        ));
        assert!(cloud.instance_exists(&n).await.unwrap());
        // Other instances are unaffected, and 0 cancels.
        cloud.set_stale_reads("node-1", 5).unwrap();
        assert!(cloud.instance_exists(&node("node-2", None)).await.unwrap());
        cloud.set_stale_reads("node-1", 0).unwrap();
        assert!(cloud.instance_exists(&n).await.unwrap());
        assert!(cloud.set_stale_reads("typo", 1).is_err());
    }

    #[tokio::test]
    async fn pending_instance_exists_without_metadata() {
        let cloud = cloud();
        cloud
            .set_instance_state("node-1", InstanceState::Pending)
            .unwrap();
        let n = node("node-1", None);
        assert!(cloud.instance_exists(&n).await.unwrap());
        assert!(!cloud.instance_shutdown(&n).await.unwrap());
        assert_eq!(cloud.instance_metadata(&n).await.unwrap(), None);
    }

    #[tokio::test]
    async fn foreign_provider_ids_are_errors_not_missing_instances() {
        let cloud = FakeCloud::builder()
            .instance(FakeInstance::new("imported").provider_id("aws:///us-east-1a/i-1"))
            .build()
            .unwrap();
        let foreign = node("node-x", Some("gce://project/zone/vm"));
        let err = cloud.instance_exists(&foreign).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("does not belong to cloud provider \"fake\""),
            "{err}"
        );
        assert!(cloud.instance_metadata(&foreign).await.is_err());
        assert!(
            cloud
                .instance_exists_by_provider_id("gce://x")
                .await
                .is_err()
        );
        assert!(cloud.get_zone_by_provider_id("fakeish://x").await.is_err());
        // Our scheme: a plain "not there".
        assert!(
            !cloud
                .instance_exists_by_provider_id("fake://nope")
                .await
                .unwrap()
        );
        // An ID an instance was configured with is ours, whatever its scheme.
        assert!(
            cloud
                .instance_exists_by_provider_id("aws:///us-east-1a/i-1")
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn adoption_makes_unknown_nodes_running_instances() {
        let cloud = FakeCloud::builder()
            .adopt_unknown_nodes(true)
            .build()
            .unwrap();
        let md = cloud
            .instance_metadata(&node("worker-7", None))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(md.provider_id, "fake://worker-7");
        assert_eq!(md.instance_type, crate::DEFAULT_INSTANCE_TYPE);
        assert!(
            cloud
                .instance_exists_by_provider_id("fake://worker-8")
                .await
                .unwrap()
        );
        assert_eq!(cloud.all_instances().len(), 2);
        // Gone stays gone; other clouds' IDs are still errors.
        cloud
            .set_instance_state("worker-7", InstanceState::Gone)
            .unwrap();
        assert!(
            !cloud
                .instance_exists(&node("worker-7", None))
                .await
                .unwrap()
        );
        assert!(
            cloud
                .instance_exists_by_provider_id("aws://x")
                .await
                .is_err()
        );
        // Off by default: an unknown name is left alone (an error, so nothing deletes its Node),
        // an unknown provider ID of this cloud's scheme is an instance that is gone.
        let strict = FakeCloud::new();
        let err = strict
            .instance_exists(&node("worker-7", None))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("leaves that Node alone"), "{err}");
        assert!(
            !strict
                .instance_exists(&node("worker-7", Some("fake://worker-7")))
                .await
                .unwrap()
        );
        assert!(strict.all_instances().is_empty());
        // A removed instance is "not found", whatever the lookup.
        strict.add_instance(FakeInstance::new("worker-9")).unwrap();
        strict.remove_instance("worker-9").unwrap();
        assert!(
            !strict
                .instance_exists(&node("worker-9", None))
                .await
                .unwrap()
        );
    }
}
