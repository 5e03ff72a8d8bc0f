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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::fake::{Facets, FakeCloud, FakeInstance, FaultSpec, InstanceState, Method};

    fn node(provider_id: Option<&str>) -> Node {
        crate::test_support::node("n1", provider_id)
    }

    /// A cloud with instance `n1` (`fake://vm-1`) and only the legacy Instances facet, or every
    /// facet.
    fn cloud(legacy_only: bool) -> FakeCloud {
        let facets = if legacy_only {
            Facets {
                instances: true,
                ..Facets::none()
            }
        } else {
            Facets::all()
        };
        FakeCloud::builder()
            .facets(facets)
            .instance(FakeInstance::new("n1").provider_id("fake://vm-1"))
            .build()
            .unwrap()
    }

    fn calls(cloud: &FakeCloud) -> Vec<String> {
        let calls = cloud.calls().into_iter();
        calls.map(|c| format!("{}({})", c.method, c.key)).collect()
    }

    #[tokio::test]
    async fn v2_asks_the_node_based_api() {
        let cloud = cloud(false);
        cloud
            .set_instance_state("n1", InstanceState::Shutdown)
            .unwrap();
        assert!(instance_shutdown(&cloud, &node(None)).await.unwrap());
        cloud.set_instance_state("n1", InstanceState::Gone).unwrap();
        assert!(!instance_exists(&cloud, &node(None)).await.unwrap());
        assert_eq!(
            calls(&cloud),
            vec!["InstanceShutdown(n1)", "InstanceExists(n1)"]
        );
    }

    #[tokio::test]
    async fn v1_uses_spec_provider_id_or_looks_it_up() {
        let cloud = cloud(true);
        assert!(
            instance_exists(&cloud, &node(Some("fake://vm-1")))
                .await
                .unwrap()
        );
        assert!(instance_exists(&cloud, &node(None)).await.unwrap());
        assert_eq!(
            calls(&cloud),
            vec![
                "InstanceExistsByProviderID(fake://vm-1)",
                "InstanceID(n1)",
                "InstanceExistsByProviderID(fake://vm-1)",
            ]
        );
    }

    #[tokio::test]
    async fn v1_lookup_not_found_means_gone_and_not_shut_down() {
        let cloud = cloud(true);
        cloud.fail(Method::InstanceID, FaultSpec::instance_not_found());
        assert!(!instance_exists(&cloud, &node(None)).await.unwrap());
        assert!(!instance_shutdown(&cloud, &node(None)).await.unwrap());
        cloud.clear_faults();
        cloud.fail(Method::InstanceID, FaultSpec::other("api down"));
        assert!(instance_exists(&cloud, &node(None)).await.is_err());
        assert!(instance_shutdown(&cloud, &node(None)).await.is_err());
    }

    #[tokio::test]
    async fn v1_shutdown_not_implemented_is_false() {
        let cloud = cloud(true);
        let n = node(Some("fake://vm-1"));
        cloud
            .set_instance_state("n1", InstanceState::Shutdown)
            .unwrap();
        cloud.fail(
            Method::InstanceShutdownByProviderID,
            FaultSpec::not_implemented(),
        );
        assert!(!instance_shutdown(&cloud, &n).await.unwrap());
        cloud.clear_faults();
        assert!(instance_shutdown(&cloud, &n).await.unwrap());
    }
}
