//! cloud-node-lifecycle controller end to end against the embedded API server and the fake cloud.
//!
//! Timing of the grace period itself is unit-tested with explicit instants in
//! `node_lifecycle::grace`; here the guard runs with a zero or a one-hour grace period so no test
//! depends on wall-clock time.

mod node_support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use cloud_controllers::event_sink::{EventType, RecordedEvents};
use cloud_controllers::node_lifecycle::{
    DeletionGuard, NodeLifecycleController, SHUTDOWN_TAINT_KEY, shutdown_taint,
};
use cloud_controllers::node_parts::NodeParts;
use fake_cloud::{FakeCloud, FakeInstance, FaultSpec, InstanceState, Method};
use node_support::*;

const TWO_TICKS: DeletionGuard = DeletionGuard {
    missing_checks: 2,
    grace_period: Duration::ZERO,
};
const ONE_TICK: DeletionGuard = DeletionGuard {
    missing_checks: 1,
    ..TWO_TICKS
};

fn controller(
    cluster: &Cluster,
    cloud: &FakeCloud,
    guard: DeletionGuard,
) -> (NodeLifecycleController, RecordedEvents) {
    let events = RecordedEvents::default();
    let parts = NodeParts::new(
        Arc::new(cloud.clone()),
        cluster.api.clone(),
        cluster.lister.clone(),
        Arc::new(events.clone()),
    )
    .expect("cloud has instances");
    let c = NodeLifecycleController::new(parts, guard);
    (c, events)
}

fn cloud_with(names: &[&str]) -> FakeCloud {
    fake(names.iter().map(|n| FakeInstance::new(*n)))
}

/// An initialized Node backed by the fake cloud's instance `name`, its Ready condition `ready`.
fn cloud_node(name: &str, ready: &str) -> Node {
    with_ready(initialized_node(name, &format!("fake://{name}")), ready)
}

fn set_state(cloud: &FakeCloud, name: &str, state: InstanceState) {
    cloud.set_instance_state(name, state).unwrap();
}

async fn tick(cluster: &Cluster, c: &NodeLifecycleController) {
    cluster.refresh().await;
    c.monitor_nodes().await;
}

#[tokio::test]
async fn gone_instance_is_deleted_after_the_grace_period() {
    let cluster = Cluster::start().await;
    let cloud = cloud_with(&["node-1", "node-2"]);
    cluster.create(cloud_node("node-1", "False")).await;
    cluster.create(cloud_node("node-2", "Unknown")).await;
    let (c, events) = controller(&cluster, &cloud, TWO_TICKS);
    set_state(&cloud, "node-1", InstanceState::Gone);

    tick(&cluster, &c).await;
    assert!(
        cluster.get_opt("node-1").await.is_some(),
        "one 'missing' answer is not enough"
    );
    assert!(events.reasons().is_empty());

    tick(&cluster, &c).await;
    assert!(
        cluster.get_opt("node-1").await.is_none(),
        "deleted on the second answer"
    );
    assert!(cluster.get_opt("node-2").await.is_some());
    let all = events.all();
    assert_eq!(events.reasons(), vec!["DeletingNode"]);
    assert_eq!(all[0].type_, EventType::Normal);
    assert_eq!(all[0].object, "node-1");
    assert_eq!(
        all[0].message,
        "Deleting node node-1 because it does not exist in the cloud provider"
    );
}

#[tokio::test]
async fn grace_period_holds_back_deletion() {
    let cluster = Cluster::start().await;
    let cloud = cloud_with(&["node-1"]);
    cluster.create(cloud_node("node-1", "False")).await;
    let guard = DeletionGuard {
        missing_checks: 1,
        grace_period: Duration::from_secs(3600),
    };
    let (c, events) = controller(&cluster, &cloud, guard);
    cloud.remove_instance("node-1");
    for _ in 0..5 {
        tick(&cluster, &c).await;
    }
    assert!(cluster.get_opt("node-1").await.is_some());
    assert!(events.reasons().is_empty());
}

#[tokio::test]
async fn uninitialized_node_is_guarded_too_and_a_blip_resets_the_count() {
    let cluster = Cluster::start().await;
    let cloud = cloud_with(&["node-1"]);
    // Joining: uninitialized, no provider ID, not Ready yet.
    cluster
        .create(with_ready(kubelet_node("node-1"), "False"))
        .await;
    let (c, events) = controller(&cluster, &cloud, TWO_TICKS);

    // An eventually consistent cloud briefly misses the fresh instance...
    set_state(&cloud, "node-1", InstanceState::Gone);
    tick(&cluster, &c).await;
    // ...then sees it again...
    set_state(&cloud, "node-1", InstanceState::Running);
    tick(&cluster, &c).await;
    // ...and misses it once more: still only one consecutive answer.
    set_state(&cloud, "node-1", InstanceState::Gone);
    tick(&cluster, &c).await;
    assert!(cluster.get_opt("node-1").await.is_some());
    assert!(events.reasons().is_empty());

    // Really gone: the second consecutive answer deletes it, taint or not (as upstream).
    tick(&cluster, &c).await;
    assert!(cluster.get_opt("node-1").await.is_none());
    assert_eq!(events.reasons(), vec!["DeletingNode"]);
}

#[tokio::test]
async fn ready_node_loses_shutdown_taint_and_is_never_deleted() {
    let cluster = Cluster::start().await;
    let cloud = cloud_with(&["node-1", "node-2"]);
    let mut tainted = cloud_node("node-1", "True");
    tainted.spec.as_mut().unwrap().taints = Some(vec![
        shutdown_taint(),
        taint("example.com/keep", "NoExecute"),
    ]);
    cluster.create(tainted).await;
    cluster.create(cloud_node("node-2", "True")).await;
    cloud.remove_instance("node-1");
    let (c, events) = controller(&cluster, &cloud, TWO_TICKS);
    cluster.refresh().await;
    cluster.env.clear_requests();

    for _ in 0..3 {
        tick(&cluster, &c).await;
    }
    let requests = cluster.env.requests();
    let writes = cluster.node_writes();

    let node = cluster.get("node-1").await;
    assert_eq!(taints(&node), vec![taint("example.com/keep", "NoExecute")]);
    assert!(cluster.get_opt("node-2").await.is_some());
    assert!(events.reasons().is_empty());
    assert!(cloud.calls().is_empty(), "Ready nodes cost no cloud call");
    // One patch for node-1; node-2 (no taint) causes no request at all beyond the lists.
    assert_eq!(writes, vec!["patch"]);
    assert!(
        requests.iter().all(|r| r.name.as_deref() != Some("node-2")),
        "no GET for a Ready node without the taint: {requests:?}"
    );
}

#[tokio::test]
async fn shutdown_instance_gets_taint() {
    let cluster = Cluster::start().await;
    let cloud = cloud_with(&["node-1", "node-2"]);
    cluster.create(cloud_node("node-1", "False")).await;
    // A same key+effect taint with a value is replaced by the upstream one.
    let mut odd = cloud_node("node-2", "Unknown");
    odd.spec.as_mut().unwrap().taints = Some(vec![Taint {
        value: Some("manual".into()),
        ..shutdown_taint()
    }]);
    cluster.create(odd).await;
    set_state(&cloud, "node-1", InstanceState::Shutdown);
    set_state(&cloud, "node-2", InstanceState::Shutdown);
    let (c, events) = controller(&cluster, &cloud, TWO_TICKS);

    tick(&cluster, &c).await;
    for name in ["node-1", "node-2"] {
        let node = cluster.get(name).await;
        assert_eq!(taints(&node), vec![shutdown_taint()], "{name}");
    }
    assert!(events.reasons().is_empty());

    // Already tainted: GET but no PATCH.
    cluster.env.clear_requests();
    tick(&cluster, &c).await;
    assert!(cluster.node_writes().is_empty());

    // Running again but still NotReady: the taint stays until the Node is Ready.
    set_state(&cloud, "node-1", InstanceState::Running);
    tick(&cluster, &c).await;
    assert_eq!(taints(&cluster.get("node-1").await), vec![shutdown_taint()]);
    cluster
        .api
        .patch_status(
            "node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap();
    tick(&cluster, &c).await;
    assert!(
        !taints(&cluster.get("node-1").await)
            .iter()
            .any(|t| t.key == SHUTDOWN_TAINT_KEY)
    );
}

#[tokio::test]
async fn taint_write_retries_conflicts_five_times() {
    let cluster = Cluster::start().await;
    let cloud = cloud_with(&["node-1"]);
    cluster.create(cloud_node("node-1", "False")).await;
    set_state(&cloud, "node-1", InstanceState::Shutdown);
    let (c, _) = controller(&cluster, &cloud, TWO_TICKS);
    cluster.refresh().await;

    // Five conflicts use up every attempt: the taint is not written (and only logged).
    cluster.env.clear_requests();
    cluster.env.faults().fail_next(5, 409, None);
    c.monitor_nodes().await;
    assert!(taints(&cluster.get("node-1").await).is_empty());
    let attempts = cluster
        .env
        .requests()
        .iter()
        .filter(|r| r.status == 409)
        .count();
    assert_eq!(attempts, 5);

    // Four conflicts, then the fifth attempt goes through.
    cluster.env.faults().fail_next(4, 409, None);
    c.monitor_nodes().await;
    assert_eq!(taints(&cluster.get("node-1").await), vec![shutdown_taint()]);
}

#[tokio::test]
async fn cloud_errors_skip_the_node() {
    let cluster = Cluster::start().await;
    let cloud = cloud_with(&["node-1"]);
    cluster.create(cloud_node("node-1", "False")).await;
    set_state(&cloud, "node-1", InstanceState::Gone);
    let (c, events) = controller(&cluster, &cloud, TWO_TICKS);
    cloud.fail(Method::InstanceExists, FaultSpec::other("cloud API down"));
    for _ in 0..3 {
        tick(&cluster, &c).await;
    }
    assert!(cluster.get_opt("node-1").await.is_some());
    assert!(events.reasons().is_empty());
    assert!(cloud.calls_to(Method::InstanceShutdown).is_empty());

    // Shutdown check failing: no taint.
    cloud.clear_faults();
    set_state(&cloud, "node-1", InstanceState::Shutdown);
    cloud.fail(Method::InstanceShutdown, FaultSpec::other("flaky"));
    tick(&cluster, &c).await;
    assert!(taints(&cluster.get("node-1").await).is_empty());
}

#[tokio::test]
async fn failed_delete_is_reported() {
    let cluster = Cluster::start().await;
    let cloud = cloud_with(&["node-1"]);
    cluster.create(cloud_node("node-1", "False")).await;
    cloud.remove_instance("node-1");
    let (c, events) = controller(&cluster, &cloud, ONE_TICK);
    cluster.refresh().await;
    // The only API request of this tick is the DELETE.
    cluster.env.faults().fail_next(1, 500, None);
    c.monitor_nodes().await;
    assert!(cluster.get_opt("node-1").await.is_some());
    assert_eq!(events.reasons(), vec!["DeletingNode", "DeletingNodeFailed"]);
    assert_eq!(events.all()[1].type_, EventType::Warning);

    // Next tick succeeds.
    tick(&cluster, &c).await;
    assert!(cluster.get_opt("node-1").await.is_none());
}

#[tokio::test]
async fn node_recreated_under_the_same_name_is_not_deleted() {
    let cluster = Cluster::start().await;
    let cloud = cloud_with(&["node-1"]);
    let old = cluster.create(cloud_node("node-1", "False")).await;
    cloud.remove_instance("node-1");
    let (c, events) = controller(&cluster, &cloud, ONE_TICK);
    // The cache still has the old Node; the API already has a new one with a new UID.
    cluster.lister.insert(old);
    cluster
        .api
        .delete("node-1", &Default::default())
        .await
        .unwrap();
    let new = cluster.create(cloud_node("node-1", "False")).await;
    c.monitor_nodes().await;
    let still = cluster.get("node-1").await;
    assert_eq!(
        still.metadata.uid, new.metadata.uid,
        "UID precondition protected the new Node"
    );
    assert_eq!(events.reasons(), vec!["DeletingNode", "DeletingNodeFailed"]);
}

#[tokio::test]
async fn legacy_instances_path_deletes_by_provider_id() {
    let cluster = Cluster::start().await;
    let cloud = legacy_fake([FakeInstance::new("node-1")]);
    // No provider ID on the Node: the lookup by name says "not found" once the instance is gone.
    cluster
        .create(with_ready(kubelet_node("node-1"), "False"))
        .await;
    let (c, events) = controller(&cluster, &cloud, TWO_TICKS);
    tick(&cluster, &c).await;
    assert!(
        !cloud
            .calls_to(Method::InstanceExistsByProviderID)
            .is_empty()
    );
    cloud.remove_instance("node-1");
    tick(&cluster, &c).await;
    tick(&cluster, &c).await;
    assert!(cluster.get_opt("node-1").await.is_none());
    assert_eq!(events.reasons(), vec!["DeletingNode"]);
}

/// Issue 16: a tick costs cloud calls for NotReady Nodes only, so a large healthy cluster costs
/// nothing and the cost follows the number of NotReady Nodes, not the cluster size.
#[tokio::test]
async fn cloud_calls_per_tick_follow_the_not_ready_nodes_only() {
    let cluster = Cluster::start().await;
    let names: Vec<String> = (0..24).map(|i| format!("node-{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let cloud = cloud_with(&refs);
    for (i, name) in names.iter().enumerate() {
        let ready = if i % 8 == 0 { "False" } else { "True" };
        cluster.create(cloud_node(name, ready)).await;
    }
    let (c, _events) = controller(&cluster, &cloud, TWO_TICKS);
    tick(&cluster, &c).await;
    let mut checked: Vec<String> = cloud
        .calls_to(Method::InstanceExists)
        .into_iter()
        .map(|call| call.key)
        .collect();
    checked.sort();
    assert_eq!(checked, ["node-0", "node-16", "node-8"]);
    assert_eq!(
        cloud.calls().len(),
        6,
        "exists + shutdown per NotReady Node, nothing for the 21 Ready ones: {:?}",
        cloud.calls()
    );
}
