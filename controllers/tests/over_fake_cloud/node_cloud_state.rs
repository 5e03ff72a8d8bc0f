//! Whether the lifecycle controller finds an instance existing or shut down, over the fake cloud.

use cloud_controllers::node_lifecycle::cloud_state::{instance_exists, instance_shutdown};
use fake_cloud::{Facets, FakeCloud, FakeInstance, FaultSpec, InstanceState, Method};
use k8s_openapi::api::core::v1::Node;

fn node(provider_id: Option<&str>) -> Node {
    fake_cloud::objects::node("n1", provider_id)
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
