//! What the cloud says about a Node's instance: does it exist, is it shut down (upstream
//! `ensureNodeExistsByProviderID` and `shutdownInCloudProvider`), via InstancesV2 when present,
//! else the legacy Instances facet keyed by provider ID.

use k8s_openapi::api::core::v1::Node;

use crate::cloud::{CloudError, CloudProvider, Instances};
use crate::node::metadata::instance_provider_id;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::test_cloud::TestCloud;
    use k8s_openapi::api::core::v1::NodeSpec;

    fn node(provider_id: Option<&str>) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("n1".into());
        n.spec = Some(NodeSpec {
            provider_id: provider_id.map(String::from),
            ..Default::default()
        });
        n
    }

    #[tokio::test]
    async fn v2_asks_the_node_based_api() {
        let cloud = TestCloud::v2(None);
        *cloud.exists.lock() = false;
        *cloud.shutdown.lock() = true;
        assert!(!instance_exists(&cloud, &node(None)).await.unwrap());
        assert!(instance_shutdown(&cloud, &node(None)).await.unwrap());
        assert_eq!(
            cloud.calls(),
            vec!["v2.instance_exists n1", "v2.instance_shutdown n1"]
        );
    }

    #[tokio::test]
    async fn v1_uses_spec_provider_id_or_looks_it_up() {
        let cloud = TestCloud::v1(false);
        assert!(
            instance_exists(&cloud, &node(Some("test://x")))
                .await
                .unwrap()
        );
        assert!(instance_exists(&cloud, &node(None)).await.unwrap());
        assert_eq!(
            cloud.calls(),
            vec![
                "instance_exists_by_provider_id test://x",
                "instance_id n1",
                "instance_exists_by_provider_id test://id-n1",
            ]
        );
    }

    #[tokio::test]
    async fn v1_lookup_not_found_means_gone_and_not_shut_down() {
        let cloud = TestCloud::v1(false);
        cloud.fail("instance_id", CloudError::InstanceNotFound);
        assert!(!instance_exists(&cloud, &node(None)).await.unwrap());
        assert!(!instance_shutdown(&cloud, &node(None)).await.unwrap());
        cloud.fail("instance_id", CloudError::other("api down"));
        assert!(instance_exists(&cloud, &node(None)).await.is_err());
        assert!(instance_shutdown(&cloud, &node(None)).await.is_err());
    }

    #[tokio::test]
    async fn v1_shutdown_not_implemented_is_false() {
        let cloud = TestCloud::v1(false);
        cloud.fail(
            "instance_shutdown_by_provider_id",
            CloudError::NotImplemented,
        );
        assert!(
            !instance_shutdown(&cloud, &node(Some("test://x")))
                .await
                .unwrap()
        );
        cloud.heal("instance_shutdown_by_provider_id");
        *cloud.shutdown.lock() = true;
        assert!(
            instance_shutdown(&cloud, &node(Some("test://x")))
                .await
                .unwrap()
        );
    }
}
