//! Whole-cloud behaviour: facets, the shared handle, caller tags, latency and the test API.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;

use super::*;

fn node(name: &str) -> Node {
    crate::objects::node(name, None)
}

fn one_node_cloud() -> FakeCloud {
    FakeCloud::builder()
        .instance(FakeInstance::new("node-1"))
        .build()
        .unwrap()
}

#[test]
fn switched_off_facets_are_absent() {
    let cloud = FakeCloud::builder()
        .facets(Facets {
            load_balancer: true,
            routes: true,
            ..Facets::none()
        })
        .build()
        .unwrap();
    assert!(cloud.load_balancer().is_some());
    assert!(cloud.routes().is_some());
    assert!(cloud.instances_v2().is_none());
    assert!(cloud.instances().is_none());
    assert!(cloud.zones().is_none());
    assert!(cloud.clusters().is_none());

    let all = FakeCloud::new();
    assert!(all.instances_v2().is_some() && all.instances().is_some() && all.zones().is_some());
    assert!(all.clusters().is_some() && all.routes().is_some() && all.load_balancer().is_some());
    assert_eq!(all.provider_name(), PROVIDER_NAME);
    assert!(all.has_cluster_id());
    let untagged = FakeCloud::builder().has_cluster_id(false).build().unwrap();
    assert!(!untagged.has_cluster_id());
}

#[tokio::test]
async fn test_handle_sees_calls_made_through_the_trait_object() {
    let cloud = one_node_cloud();
    let provider: Arc<dyn CloudProvider> = Arc::new(cloud.clone());
    let v2 = provider.instances_v2().unwrap();
    assert!(v2.instance_exists(&node("node-1")).await.unwrap());

    cloud
        .set_instance_state("node-1", InstanceState::Gone)
        .unwrap();
    assert!(!v2.instance_exists(&node("node-1")).await.unwrap());

    let calls = cloud.calls_to(Method::InstanceExists);
    assert_eq!(calls.len(), 2);
    assert!(
        calls
            .iter()
            .all(|c| c.key == "node-1" && c.caller.is_none())
    );
    cloud.clear_calls();
    assert!(cloud.calls().is_empty());
}

#[tokio::test]
async fn caller_tags_tell_replicas_apart() {
    let cloud = one_node_cloud();
    let leader = cloud.with_caller("ccm-a");
    let standby = cloud.with_caller("ccm-b");
    leader.instance_exists(&node("node-1")).await.unwrap();
    standby.instance_exists(&node("node-1")).await.unwrap();
    // set_caller retags this handle and its clones, not the other handles.
    let leader_clone = leader.clone();
    leader_clone.set_caller("ccm-a-restarted");
    leader.instance_exists(&node("node-1")).await.unwrap();
    cloud.instance_exists(&node("node-1")).await.unwrap();

    let callers: Vec<_> = cloud.calls().into_iter().map(|c| c.caller).collect();
    assert_eq!(
        callers,
        vec![
            Some("ccm-a".to_owned()),
            Some("ccm-b".to_owned()),
            Some("ccm-a-restarted".to_owned()),
            None
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn latency_delays_on_the_tokio_clock() {
    let cloud = one_node_cloud();
    cloud.set_latency(Method::InstanceMetadata, Duration::from_secs(30));
    let start = tokio::time::Instant::now();
    let n = node("node-1");
    let call = cloud.instance_metadata(&n);
    // A shorter timeout fires first: the call really waits.
    assert!(
        tokio::time::timeout(Duration::from_secs(29), call)
            .await
            .is_err()
    );
    // The abandoned call was never logged: it had not reached the cloud.
    assert!(cloud.calls().is_empty());
    cloud.instance_metadata(&node("node-1")).await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(59));
    // Other methods are not delayed.
    let before = tokio::time::Instant::now();
    cloud.instance_exists(&node("node-1")).await.unwrap();
    assert_eq!(before.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn latency_and_faults_combine() {
    let cloud = one_node_cloud();
    cloud.set_latency(Method::InstanceShutdown, Duration::from_secs(5));
    cloud.fail(Method::InstanceShutdown, FaultSpec::other("timeout"));
    let start = tokio::time::Instant::now();
    let err = cloud.instance_shutdown(&node("node-1")).await.unwrap_err();
    assert_eq!(err.to_string(), "timeout");
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    cloud.clear_faults();
    cloud.set_latency(Method::InstanceShutdown, Duration::ZERO);
    assert!(!cloud.instance_shutdown(&node("node-1")).await.unwrap());
}

#[tokio::test]
async fn injected_errors_keep_their_variant() {
    let cloud = one_node_cloud();
    cloud.fail(
        Method::InstanceMetadata,
        FaultSpec::not_implemented().times(1),
    );
    cloud.fail(
        Method::InstanceMetadata,
        FaultSpec::instance_not_found().times(1),
    );
    cloud.fail(
        Method::InstanceMetadata,
        FaultSpec::implemented_elsewhere().times(1),
    );
    let n = node("node-1");
    assert!(matches!(
        cloud.instance_metadata(&n).await,
        Err(CloudError::NotImplemented)
    ));
    assert!(matches!(
        cloud.instance_metadata(&n).await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(
        cloud.instance_metadata(&n).await,
        Err(CloudError::ImplementedElsewhere)
    ));
    assert!(cloud.instance_metadata(&n).await.is_ok());
    cloud.fail(Method::InstanceMetadata, FaultSpec::other("x"));
    cloud.clear_faults_for(Method::InstanceMetadata);
    assert!(cloud.instance_metadata(&n).await.is_ok());
}

#[tokio::test]
async fn initialize_is_logged() {
    let cloud = FakeCloud::new();
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    let ctx = InitializeContext {
        clients: controller_manager::client::ClientBuilder::shared(client),
        shutdown: tokio_util::sync::CancellationToken::new(),
    };
    cloud.initialize(ctx).await.unwrap();
    assert_eq!(cloud.calls_to(Method::Initialize).len(), 1);
}

#[test]
fn instance_test_api_adds_replaces_updates_and_removes() {
    let cloud = FakeCloud::builder().provider_name("acme").build().unwrap();
    cloud
        .add_instance(FakeInstance::new("n1").instance_type("small"))
        .unwrap();
    assert_eq!(cloud.instance("n1").unwrap().provider_id, "acme://n1");
    cloud
        .add_instance(FakeInstance::new("n1").instance_type("large"))
        .unwrap();
    let taken = cloud.add_instance(FakeInstance::new("n2").provider_id("acme://n1"));
    assert!(matches!(
        taken,
        Err(ConfigError::DuplicateProviderId { .. })
    ));
    let bad = cloud.add_instance(FakeInstance::new("n2").external_ip("n2.example.com"));
    assert!(matches!(bad, Err(ConfigError::InvalidNodeAddress { .. })));
    assert_eq!(cloud.all_instances().len(), 1);
    assert_eq!(cloud.instance("n1").unwrap().instance_type, "large");
    cloud
        .update_instance("n1", |i| {
            i.additional_labels.insert("k".into(), "v".into());
        })
        .unwrap();
    assert_eq!(cloud.instance("n1").unwrap().additional_labels["k"], "v");
    let err = cloud.update_instance("n9", |_| {}).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the fake cloud has no instance named \"n9\""
    );
    assert!(cloud.remove_instance("n1").is_some());
    assert!(cloud.remove_instance("n1").is_none());
}

#[tokio::test]
async fn wait_for_calls_returns_once_the_calls_are_logged() {
    let cloud = one_node_cloud();
    let n = node("node-1");
    let wait = cloud.wait_for_calls(Method::InstanceExists, 2);
    tokio::pin!(wait);
    assert!(futures::poll!(&mut wait).is_pending(), "nothing logged yet");
    cloud.instance_exists(&n).await.unwrap();
    cloud.instance_shutdown(&n).await.unwrap();
    assert!(
        futures::poll!(&mut wait).is_pending(),
        "one matching call is not two"
    );
    cloud.instance_exists(&n).await.unwrap();
    let calls = wait.await;
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| c.method == Method::InstanceExists));
    // Already satisfied: returns at once.
    assert_eq!(
        cloud
            .wait_for_calls(Method::InstanceShutdown, 1)
            .await
            .len(),
        1
    );
}
