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
