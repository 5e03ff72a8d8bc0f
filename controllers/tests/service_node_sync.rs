//! End-to-end tests of the service controller's node-triggered backend updates, against
//! kube-testenv and the fake cloud (harness in `service_support`).

mod service_support;

use std::sync::Arc;

use cloud_controllers::cloud::{CloudProvider, LoadBalancer};
use cloud_controllers::event_sink::{EventType, RecordedEvents};
use cloud_controllers::service::predicates::EXCLUDE_FROM_LOAD_BALANCERS_LABEL;
use cloud_controllers::service::{NodeLister, ServiceController};
use cloud_controllers::wiring::RetryHint;
use fake_cloud::{FakeCloud, FaultSpec, Method};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::json;
use service_support::*;

#[tokio::test]
async fn node_set_change_updates_backends_once() {
    let h = harness(&["n1"]).await;
    h.provision().await;
    h.ctl.sync_load_balancer_hosts(KEY).await.unwrap();
    assert_eq!(h.calls(Method::UpdateLoadBalancer), 0, "node set unchanged");

    let n2 = Api::<Node>::all(h.client.clone())
        .create(&PostParams::default(), &node("n2"))
        .await
        .unwrap();
    assert!(ServiceController::node_event_triggers(None, Some(&n2)));
    h.cache.refresh(&h.client).await;
    h.ctl.sync_load_balancer_hosts(KEY).await.unwrap();
    assert_eq!(h.cloud.lb_for(KEY).unwrap().nodes, ["n1", "n2"]);
    assert_eq!(h.calls(Method::UpdateLoadBalancer), 1);
    assert_eq!(h.events.reasons().last().unwrap(), "UpdatedLoadBalancer");
    assert_eq!(h.metrics.loadbalancer_sync.get(), 1);

    // Excluding a node by label is a node-set change too.
    let label = json!({"metadata": {"labels": {EXCLUDE_FROM_LOAD_BALANCERS_LABEL: "true"}}});
    let excluded = Api::<Node>::all(h.client.clone())
        .patch("n1", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    let before = h
        .cache
        .list()
        .into_iter()
        .find(|n| n.metadata.name.as_deref() == Some("n1"))
        .unwrap();
    assert!(ServiceController::node_event_triggers(
        Some(&before),
        Some(&excluded)
    ));
    h.cache.refresh(&h.client).await;
    h.ctl.sync_load_balancer_hosts(KEY).await.unwrap();
    assert_eq!(h.cloud.lb_for(KEY).unwrap().nodes, ["n2"]);
    assert_eq!(h.calls(Method::UpdateLoadBalancer), 2);

    // A second pass with the same set costs nothing.
    h.ctl.sync_load_balancer_hosts(KEY).await.unwrap();
    assert_eq!(h.calls(Method::UpdateLoadBalancer), 2);
}

#[tokio::test]
async fn failed_node_sync_is_retried_from_the_set_the_cloud_accepted() {
    let h = harness(&["n1"]).await;
    h.provision().await;
    h.join_node("n2").await;
    h.cloud.fail(
        Method::UpdateLoadBalancer,
        FaultSpec::other("backend busy").times(1),
    );

    let err = h.ctl.sync_load_balancer_hosts(KEY).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to update load balancer hosts: backend busy"
    );
    assert_eq!(err.retry_after(), None, "plain errors back off");
    let last = h.events.all().pop().unwrap();
    assert_eq!(last.reason, "UpdateLoadBalancerFailed");
    assert_eq!(last.type_, EventType::Warning);
    assert!(last.message.contains("[n1 n2]"), "{}", last.message);
    assert_eq!(h.metrics.nodesync_error.get(), 1);
    assert_eq!(h.cloud.lb_for(KEY).unwrap().nodes, ["n1"]);

    // The failed set was not recorded, so the retry (same node set, no new node event) still
    // calls the cloud; upstream recorded it first and the update was lost.
    h.ctl.sync_load_balancer_hosts(KEY).await.unwrap();
    assert_eq!(h.cloud.lb_for(KEY).unwrap().nodes, ["n1", "n2"]);
    assert_eq!(h.calls(Method::UpdateLoadBalancer), 2);
    h.ctl.sync_load_balancer_hosts(KEY).await.unwrap();
    assert_eq!(
        h.calls(Method::UpdateLoadBalancer),
        2,
        "accepted: nothing left"
    );
}

/// A quota refusal (`Retry { after }`, up to a second) is waited out in place, up to five times,
/// so the key keeps its place instead of queueing behind load balancers that already hold the
/// new Nodes; a sixth, or a longer pause, goes back to the queue with the cloud's delay.
#[tokio::test]
async fn quota_refusals_of_a_node_sync_are_waited_out_in_place() {
    let h = harness(&["n1"]).await;
    h.provision().await;
    h.join_node("n2").await;
    let after = std::time::Duration::from_millis(5);
    h.cloud.fail(
        Method::UpdateLoadBalancer,
        FaultSpec::retry("quota", after).times(3),
    );
    h.ctl.sync_load_balancer_hosts(KEY).await.unwrap();
    assert_eq!(
        h.calls(Method::UpdateLoadBalancer),
        4,
        "three refused, one accepted"
    );
    assert_eq!(h.cloud.lb_for(KEY).unwrap().nodes, ["n1", "n2"]);

    h.join_node("n3").await;
    h.cloud.fail(
        Method::UpdateLoadBalancer,
        FaultSpec::retry("quota", after).times(6),
    );
    let err = h.ctl.sync_load_balancer_hosts(KEY).await.unwrap_err();
    assert_eq!(err.retry_after(), Some(after), "{err}");
    assert_eq!(h.calls(Method::UpdateLoadBalancer), 4 + 6);
    assert_eq!(h.cloud.lb_for(KEY).unwrap().nodes, ["n1", "n2"]);

    // A pause longer than a second is the cloud's to keep: requeued at once, not waited out.
    h.cloud.clear_faults();
    let long = std::time::Duration::from_secs(30);
    h.cloud.fail(
        Method::UpdateLoadBalancer,
        FaultSpec::retry("quota", long).times(1),
    );
    let err = h.ctl.sync_load_balancer_hosts(KEY).await.unwrap_err();
    assert_eq!(err.retry_after(), Some(long), "{err}");
    assert_eq!(h.calls(Method::UpdateLoadBalancer), 4 + 6 + 1);
}

/// A load balancer this process has not ensured may not exist yet: a node sync leaves it to the
/// ensure (queued or retried), which passes the node set of its own time. Upstream's node sync
/// calls `UpdateLoadBalancer` for it, and the cloud answers "not found".
#[tokio::test]
async fn a_load_balancer_not_yet_ensured_gets_no_host_update() {
    let h = harness(&["n1"]).await;
    h.create(&lb_service("web")).await;
    h.cloud.fail(
        Method::EnsureLoadBalancer,
        FaultSpec::other("quota").times(1),
    );
    h.ctl.sync_service(KEY).await.unwrap_err();
    // The Service is known and wants a load balancer, but the cloud never took its ensure.
    assert_eq!(
        h.ctl.node_sync_keys_since(tokio::time::Instant::now()),
        [KEY]
    );
    h.ctl.sync_load_balancer_hosts(KEY).await.unwrap();
    assert_eq!(
        h.calls(Method::UpdateLoadBalancer),
        0,
        "no update before the ensure"
    );
    assert_eq!(h.calls(Method::GetLoadBalancer), 0);
    h.ctl.sync_service(KEY).await.unwrap();
    assert_eq!(h.cloud.lb_for(KEY).unwrap().nodes, ["n1"]);
    h.ctl.sync_load_balancer_hosts(KEY).await.unwrap();
    assert_eq!(
        h.calls(Method::UpdateLoadBalancer),
        0,
        "the ensure recorded [n1]"
    );
    h.join_node("n2").await;
    h.ctl.sync_load_balancer_hosts(KEY).await.unwrap();
    assert_eq!(
        h.calls(Method::UpdateLoadBalancer),
        1,
        "ensured: kept in step"
    );
    assert_eq!(h.cloud.lb_for(KEY).unwrap().nodes, ["n1", "n2"]);
}

#[tokio::test]
async fn node_sync_ignores_update_errors_when_lb_is_gone() {
    let h = harness(&["n1"]).await;
    h.provision().await;
    // The load balancer vanished in the cloud behind our back.
    let svc = h.get("web").await.unwrap();
    h.cloud
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    h.join_node("n2").await;
    h.ctl.sync_load_balancer_hosts(KEY).await.unwrap();
    assert_eq!(h.calls(Method::GetLoadBalancer), 1);
}

#[tokio::test]
async fn not_started_without_load_balancer_facet() {
    use fake_cloud::Facets;
    let env = TestEnv::start().await.unwrap();
    let cloud = FakeCloud::builder().facets(Facets::none()).build().unwrap();
    assert!(cloud.load_balancer().is_none());
    let cache = Arc::new(Cache::default());
    let result = ServiceController::new(
        Arc::new(cloud),
        env.client(),
        CLUSTER,
        cache.clone(),
        cache,
        Arc::new(RecordedEvents::default()),
    );
    assert!(result.is_err());
}

/// Polls `cond` every 20 ms for up to 30 s (the fake cloud has no change notification).
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_with_leader_election_retries_a_failed_node_sync() {
    use clap::Parser;
    use cloud_controllers::options::CloudOptions;
    use cloud_controllers::{CloudContext, cloud_initializers};
    use controller_manager::leader::LeaderElectionConfig;
    use controller_manager::manager::{Manager, ManagerConfig};
    use k8s_openapi::api::coordination::v1::Lease;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        cloud: CloudOptions,
    }
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let nodes = Api::<Node>::all(client.clone());
    nodes
        .create(&PostParams::default(), &node("n1"))
        .await
        .unwrap();
    let services = Api::namespaced(client.clone(), "default");
    let keys: Vec<String> = (0..3).map(|i| format!("default/lb-{i}")).collect();
    for i in 0..3 {
        services
            .create(&PostParams::default(), &lb_service(&format!("lb-{i}")))
            .await
            .unwrap();
    }
    let cloud = FakeCloud::new();
    let failing = "default/lb-1";
    cloud.fail(
        Method::UpdateLoadBalancer,
        FaultSpec::other("backend pool locked")
            .only_for(failing)
            .times(1),
    );
    let mut config = ManagerConfig::new("ccm-node-sync");
    config.controllers = vec!["service".into()];
    config.graceful_shutdown_timeout = std::time::Duration::from_secs(5);
    config.leader_election = Some(LeaderElectionConfig::new(
        "kube-system",
        "ccm-node-sync",
        "replica-a",
    ));
    let opts = Flags::parse_from([
        "test",
        "--concurrent-service-syncs=2",
        "--node-sync-batch-period=300ms",
    ])
    .cloud;
    let manager = Manager::new(
        config,
        client.clone(),
        CloudContext::new(Arc::new(cloud.clone()), opts),
    )
    .with_initializers(cloud_initializers());
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(manager.run(stop.clone()));

    let holds = |want: &[&str]| {
        keys.iter()
            .all(|k| cloud.lb_for(k).is_some_and(|lb| lb.nodes == want))
    };
    eventually("every LB provisioned on [n1]", || holds(&["n1"])).await;
    for n in ["n2", "n3"] {
        nodes
            .create(&PostParams::default(), &node(n))
            .await
            .unwrap();
    }
    // The failed update is retried 5 s later for lb-1 alone; the others are not held.
    eventually("every LB on [n1 n2 n3]", || holds(&["n1", "n2", "n3"])).await;
    let updates = cloud.calls_to(Method::UpdateLoadBalancer);
    let of = |key: &str| {
        updates
            .iter()
            .filter(|c| c.key == key)
            .map(|c| c.outcome.is_ok())
            .collect::<Vec<_>>()
    };
    assert_eq!(of(failing), [false, true], "{updates:#?}");
    for key in ["default/lb-0", "default/lb-2"] {
        let ok = of(key);
        assert!(
            !ok.is_empty() && ok.len() <= 2 && ok.iter().all(|o| *o),
            "{key}: {ok:?}"
        );
    }
    let lease = Api::<Lease>::namespaced(client.clone(), "kube-system")
        .get("ccm-node-sync")
        .await
        .unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("replica-a")
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}
