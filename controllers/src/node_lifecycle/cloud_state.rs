//! What the cloud says about a Node's instance: does it exist, is it shut down (upstream
//! `ensureNodeExistsByProviderID` and `shutdownInCloudProvider`), via InstancesV2 when present,
//! else the legacy Instances facet keyed by provider ID.

use k8s_openapi::api::core::v1::Node;

use crate::cloud::{CloudError, CloudProvider, Instances, instance_provider_id};

fn facets_missing() -> CloudError {
    CloudError::other("cloud provider supports neither InstancesV2 nor Instances")
}

/// The Node's provider ID, looked up from the cloud by name when the spec has none;
/// `Ok(None)` when the cloud says there is no such instance.
async fn provider_id(
    cloud: &dyn CloudProvider,
    instances: &dyn Instances,
    node: &Node,
) -> Result<Option<String>, CloudError> {
    let spec = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default();
    if !spec.is_empty() {
        return Ok(Some(spec.to_string()));
    }
    let name = node.metadata.name.as_deref().unwrap_or_default();
    match instance_provider_id(cloud, instances, name).await {
        Ok(id) => Ok(Some(id)),
        Err(CloudError::InstanceNotFound) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Whether the instance behind `node` exists. `Ok(false)` is only a claim by the cloud; the
/// controller confirms it over a grace period before deleting anything.
pub async fn instance_exists(cloud: &dyn CloudProvider, node: &Node) -> Result<bool, CloudError> {
    if let Some(v2) = cloud.instances_v2() {
        return v2.instance_exists(node).await;
    }
    let instances = cloud.instances().ok_or_else(facets_missing)?;
    match provider_id(cloud, instances, node).await? {
        Some(id) => instances.instance_exists_by_provider_id(&id).await,
        None => Ok(false),
    }
}

/// Whether the instance behind `node` is shut down; an unknown instance or a provider that cannot
/// tell counts as "not shut down" on the legacy path, as upstream.
pub async fn instance_shutdown(cloud: &dyn CloudProvider, node: &Node) -> Result<bool, CloudError> {
    if let Some(v2) = cloud.instances_v2() {
        return v2.instance_shutdown(node).await;
    }
    let instances = cloud.instances().ok_or_else(facets_missing)?;
    let Some(id) = provider_id(cloud, instances, node).await? else {
        return Ok(false);
    };
    match instances.instance_shutdown_by_provider_id(&id).await {
        Err(CloudError::NotImplemented) => Ok(false),
        other => other,
    }
}
