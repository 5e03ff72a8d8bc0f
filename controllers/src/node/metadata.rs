//! Instance metadata for a Node, from InstancesV2 when the provider has it, else from the legacy
//! Instances facet plus Zones, with every upstream fallback (upstream `getInstanceMetadata`,
//! `getInstanceNodeAddresses`, `cloudprovider.GetInstanceProviderID`).

use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::cloud::{
    CloudError, CloudProvider, InstanceMetadata, Instances, Zones, instance_provider_id,
};

/// Why metadata could not be obtained; the sync is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// Neither instances facet exists; the controllers refuse to start in that case, so this only
    /// appears when a provider changes its facets at run time.
    #[error("cloud provider {provider} supports neither InstancesV2 nor Instances")]
    NoInstances {
        /// The provider's name.
        provider: String,
    },
    /// An InstancesV2 provider returned no provider ID and the Node has none: initializing without
    /// one would leave a Node the lifecycle and route controllers cannot match to the cloud.
    #[error("cloud provider does not set node provider ID for node {node}")]
    MissingProviderId {
        /// The Node's name.
        node: String,
    },
    /// A single cloud call failed.
    #[error(transparent)]
    Cloud(#[from] CloudError),
    /// Both the provider-ID lookup and the node-name fallback failed.
    #[error(
        "{what}: error fetching by providerID: {by_provider_id}; error fetching by node name: {by_name}"
    )]
    BothLookupsFailed {
        /// Which lookup (`InstanceType`, `NodeAddresses`, `Zone`).
        what: &'static str,
        /// The error of the provider-ID lookup.
        by_provider_id: CloudError,
        /// The error of the node-name fallback.
        by_name: CloudError,
    },
}

impl MetadataError {
    /// The fixed delay the cloud asked for, so callers can requeue after it.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            MetadataError::Cloud(err) => err.retry_after(),
            MetadataError::BothLookupsFailed { by_name, .. } => by_name.retry_after(),
            _ => None,
        }
    }
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

fn spec_provider_id(node: &Node) -> &str {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default()
}

/// Metadata for initializing `node`; `Ok(None)` when an InstancesV2 provider has none yet (the
/// taint stays and a later Node event retries).
pub async fn instance_metadata(
    cloud: &dyn CloudProvider,
    node: &Node,
) -> Result<Option<InstanceMetadata>, MetadataError> {
    if let Some(v2) = cloud.instances_v2() {
        let Some(mut metadata) = v2.instance_metadata(node).await? else {
            return Ok(None);
        };
        if metadata.provider_id.is_empty() {
            let existing = spec_provider_id(node);
            if existing.is_empty() {
                return Err(MetadataError::MissingProviderId {
                    node: node_name(node).to_string(),
                });
            }
            metadata.provider_id = existing.to_string();
        }
        return Ok(Some(metadata));
    }
    let instances = cloud
        .instances()
        .ok_or_else(|| MetadataError::NoInstances {
            provider: cloud.provider_name().to_string(),
        })?;
    let name = node_name(node);
    let mut provider_id = spec_provider_id(node).to_string();
    if provider_id.is_empty() {
        provider_id = match instance_provider_id(cloud, instances, name).await {
            Ok(id) => id,
            Err(CloudError::NotImplemented) => {
                tracing::warn!(node = name, "cloud provider cannot look up the provider ID");
                String::new()
            }
            Err(err) => return Err(err.into()),
        };
    }
    let instance_type = instance_type(instances, &provider_id, name).await?;
    let node_addresses = addresses_v1(instances, &provider_id, name).await?;
    let mut metadata = InstanceMetadata {
        provider_id,
        instance_type,
        node_addresses,
        ..Default::default()
    };
    if let Some(zones) = cloud.zones() {
        let zone = zone(zones, &metadata.provider_id, name).await?;
        if !zone.failure_domain.is_empty() {
            metadata.zone = zone.failure_domain;
        }
        if !zone.region.is_empty() {
            metadata.region = zone.region;
        }
    }
    Ok(Some(metadata))
}

/// Current addresses of an initialized Node for the periodic refresh; `Ok(None)` when an
/// InstancesV2 provider returns no metadata (upstream would dereference nil here).
pub async fn instance_addresses(
    cloud: &dyn CloudProvider,
    node: &Node,
) -> Result<Option<Vec<NodeAddress>>, MetadataError> {
    if let Some(v2) = cloud.instances_v2() {
        return Ok(v2.instance_metadata(node).await?.map(|m| m.node_addresses));
    }
    let instances = cloud
        .instances()
        .ok_or_else(|| MetadataError::NoInstances {
            provider: cloud.provider_name().to_string(),
        })?;
    addresses_v1(instances, spec_provider_id(node), node_name(node))
        .await
        .map(Some)
}

async fn instance_type(
    instances: &dyn Instances,
    provider_id: &str,
    name: &str,
) -> Result<String, MetadataError> {
    match instances.instance_type_by_provider_id(provider_id).await {
        Ok(t) => Ok(t),
        Err(by_provider_id) => instances.instance_type(name).await.map_err(|by_name| {
            MetadataError::BothLookupsFailed {
                what: "InstanceType",
                by_provider_id,
                by_name,
            }
        }),
    }
}

async fn addresses_v1(
    instances: &dyn Instances,
    provider_id: &str,
    name: &str,
) -> Result<Vec<NodeAddress>, MetadataError> {
    match instances.node_addresses_by_provider_id(provider_id).await {
        Ok(a) => Ok(a),
        Err(by_provider_id) => instances.node_addresses(name).await.map_err(|by_name| {
            MetadataError::BothLookupsFailed {
                what: "NodeAddresses",
                by_provider_id,
                by_name,
            }
        }),
    }
}

async fn zone(
    zones: &dyn Zones,
    provider_id: &str,
    name: &str,
) -> Result<crate::cloud::Zone, MetadataError> {
    match zones.get_zone_by_provider_id(provider_id).await {
        Ok(z) => Ok(z),
        Err(by_provider_id) => zones.get_zone_by_node_name(name).await.map_err(|by_name| {
            MetadataError::BothLookupsFailed {
                what: "Zone",
                by_provider_id,
                by_name,
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::fake::{
        Facets, FakeCloud, FakeCloudBuilder, FakeInstance, FaultSpec, InstanceState, Method,
    };

    fn node(provider_id: Option<&str>) -> Node {
        crate::test_support::node("n1", provider_id)
    }

    /// What `instance_metadata` returns for `n1`, which must be metadata.
    async fn metadata_of(cloud: &FakeCloud, provider_id: Option<&str>) -> InstanceMetadata {
        let md = instance_metadata(cloud, &node(provider_id)).await;
        md.unwrap().expect("metadata, not \"not yet\"")
    }

    fn addr(a: &str) -> NodeAddress {
        NodeAddress {
            type_: "InternalIP".into(),
            address: a.into(),
        }
    }

    /// A cloud holding instance `n1` (`fake://n1`, `t1`, `10.0.0.1`, zone `z`/region `r`).
    fn with_n1(builder: FakeCloudBuilder) -> FakeCloud {
        builder
            .instance(
                FakeInstance::new("n1")
                    .instance_type("t1")
                    .internal_ip("10.0.0.1")
                    .zone("z", "r"),
            )
            .build()
            .unwrap()
    }

    /// A legacy provider: Instances, with or without Zones, and no InstancesV2.
    fn v1(zones: bool) -> FakeCloud {
        with_n1(FakeCloud::builder().facets(Facets {
            instances: true,
            zones,
            ..Facets::none()
        }))
    }

    fn methods(cloud: &FakeCloud) -> Vec<Method> {
        cloud.calls().iter().map(|c| c.method).collect()
    }

    #[tokio::test]
    async fn v2_metadata_is_used_as_is() {
        let cloud = with_n1(FakeCloud::builder());
        let md = metadata_of(&cloud, None).await;
        assert_eq!(md.provider_id, "fake://n1");
        assert_eq!(md.zone, "z");
        assert_eq!(methods(&cloud), vec![Method::InstanceMetadata]);
    }

    #[tokio::test]
    async fn v2_without_provider_id_falls_back_to_the_node_or_fails() {
        let cloud = with_n1(FakeCloud::builder().metadata_without_provider_id(true));
        let md = metadata_of(&cloud, Some("fake://n1")).await;
        assert_eq!(md.provider_id, "fake://n1");
        let err = instance_metadata(&cloud, &node(None)).await.unwrap_err();
        assert!(
            matches!(err, MetadataError::MissingProviderId { .. }),
            "{err}"
        );
    }

    #[tokio::test]
    async fn v2_none_means_not_yet() {
        let cloud = with_n1(FakeCloud::builder());
        cloud
            .set_instance_state("n1", InstanceState::Pending)
            .unwrap();
        assert!(
            instance_metadata(&cloud, &node(None))
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            instance_addresses(&cloud, &node(None))
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn v1_builds_provider_id_and_uses_provider_id_lookups() {
        let cloud = v1(true);
        let md = metadata_of(&cloud, None).await;
        assert_eq!(md.provider_id, "fake://n1");
        assert_eq!(md.instance_type, "t1");
        assert_eq!(md.node_addresses, vec![addr("10.0.0.1")]);
        assert_eq!((md.zone.as_str(), md.region.as_str()), ("z", "r"));
        let calls: Vec<_> = cloud.calls().iter().map(|c| c.to_string()).collect();
        assert_eq!(
            calls,
            vec![
                "InstanceID(n1) -> ok",
                "InstanceTypeByProviderID(fake://n1) -> ok",
                "NodeAddressesByProviderID(fake://n1) -> ok",
                "GetZoneByProviderID(fake://n1) -> ok",
            ]
        );
    }

    #[tokio::test]
    async fn v1_falls_back_to_name_lookups() {
        let cloud = v1(true);
        cloud.fail(
            Method::InstanceTypeByProviderID,
            FaultSpec::not_implemented(),
        );
        cloud.fail(
            Method::NodeAddressesByProviderID,
            FaultSpec::instance_not_found(),
        );
        cloud.fail(Method::GetZoneByProviderID, FaultSpec::other("boom"));
        let md = metadata_of(&cloud, Some("fake://n1")).await;
        assert_eq!(md.provider_id, "fake://n1");
        assert_eq!(md.instance_type, "t1");
        assert_eq!(md.node_addresses, vec![addr("10.0.0.1")]);
        assert_eq!(md.zone, "z");
        assert_eq!(
            methods(&cloud),
            vec![
                Method::InstanceTypeByProviderID,
                Method::InstanceType,
                Method::NodeAddressesByProviderID,
                Method::NodeAddresses,
                Method::GetZoneByProviderID,
                Method::GetZoneByNodeName,
            ],
            "no InstanceID lookup, and each value from the name-based fallback"
        );
    }

    #[tokio::test]
    async fn v1_both_lookups_failing_is_an_error() {
        for (by_id, by_name) in [
            (Method::InstanceTypeByProviderID, Method::InstanceType),
            (Method::NodeAddressesByProviderID, Method::NodeAddresses),
            (Method::GetZoneByProviderID, Method::GetZoneByNodeName),
        ] {
            let cloud = v1(true);
            cloud.fail(by_id, FaultSpec::other("a"));
            cloud.fail(by_name, FaultSpec::other("b"));
            let err = instance_metadata(&cloud, &node(None)).await.unwrap_err();
            assert!(
                matches!(err, MetadataError::BothLookupsFailed { .. }),
                "{by_name}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn v1_provider_id_lookup_not_implemented_continues_other_errors_fail() {
        let cloud = v1(false);
        cloud.fail(Method::InstanceID, FaultSpec::not_implemented());
        let md = metadata_of(&cloud, None).await;
        assert_eq!(md.provider_id, "");
        assert_eq!(md.zone, "", "no Zones facet, no zone");

        let cloud = v1(false);
        cloud.fail(Method::InstanceID, FaultSpec::instance_not_found());
        let err = instance_metadata(&cloud, &node(None)).await.unwrap_err();
        assert!(matches!(
            err,
            MetadataError::Cloud(CloudError::InstanceNotFound)
        ));
    }

    #[tokio::test]
    async fn v1_periodic_addresses_fall_back_to_name() {
        let cloud = v1(false);
        cloud.fail(Method::NodeAddressesByProviderID, FaultSpec::other("x"));
        let got = instance_addresses(&cloud, &node(Some("fake://n1")))
            .await
            .unwrap();
        assert_eq!(got, Some(vec![addr("10.0.0.1")]));
        assert_eq!(methods(&cloud).last(), Some(&Method::NodeAddresses));
    }
}
