//! cloud-node controller end to end: Nodes created through a real `kube::Client` against the
//! embedded API server, initialized from the fake cloud, checked through the API.

mod node_support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeAddress};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use cloud_controllers::cloud::CloudProvider;
use cloud_controllers::event_sink::RecordedEvents;
use cloud_controllers::node::modifiers::{
    LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, LABEL_REGION, LABEL_REGION_BETA, LABEL_ZONE,
    LABEL_ZONE_BETA,
};
use cloud_controllers::node::{
    NodeController, NodeLister, NodeMetrics, NodeSyncError, PROVIDED_NODE_IP_ANNOTATION,
    UNINITIALIZED_TAINT_KEY,
};
use cloud_controllers::node_parts::NodeParts;
use cloud_controllers::wiring::RetryHint;
use fake_cloud::{Facets, FakeCloud, FakeInstance, FaultSpec, InstanceState, Method};
use node_support::*;

fn instance() -> FakeInstance {
    FakeInstance::new("node-1")
        .instance_type("fake.large")
        .zone("zone-a", "region-1")
        .internal_ip("10.0.0.1")
        .external_ip("203.0.113.1")
        .label("pool.example.com/name", "blue")
        .label("node.kubernetes.io/sneaky", "x")
}

/// The addresses of a synced node-1: `internal` first, the instance's ExternalIP, kubelet's
/// hostname.
fn synced_addresses(internal: &str) -> Vec<NodeAddress> {
    let external = addr("ExternalIP", "203.0.113.1");
    vec![
        addr("InternalIP", internal),
        external,
        addr("Hostname", "kubelet-host"),
    ]
}

fn controller(
    cluster: &Cluster,
    cloud: &FakeCloud,
) -> (NodeController, RecordedEvents, NodeMetrics) {
    controller_with(cluster, Arc::new(cloud.clone()), cluster.lister.clone())
}

fn controller_with(
    cluster: &Cluster,
    cloud: Arc<dyn CloudProvider>,
    lister: Arc<dyn NodeLister>,
) -> (NodeController, RecordedEvents, NodeMetrics) {
    let events = RecordedEvents::default();
    let metrics = NodeMetrics::unregistered();
    let parts = NodeParts::new(cloud, cluster.api.clone(), lister, Arc::new(events.clone()))
        .expect("cloud has instances");
    let c = NodeController::new(parts, metrics.clone());
    (c, events, metrics)
}

/// A cluster with node-1 as kubelet registers it, in the API and the cache, and the request log
/// cleared.
async fn registered() -> Cluster {
    let cluster = Cluster::start().await;
    cluster.create(kubelet_node("node-1")).await;
    cluster.refresh().await;
    cluster.env.clear_requests();
    cluster
}

#[tokio::test]
async fn initializes_node_end_to_end() {
    let cluster = registered().await;
    let cloud = fake([instance()]);
    let (c, events, metrics) = controller(&cluster, &cloud);

    c.sync_node("node-1").await.expect("sync succeeds");

    let node = cluster.get("node-1").await;
    assert_eq!(provider_id(&node).as_deref(), Some("fake://node-1"));
    let l = labels(&node);
    assert_eq!(l[LABEL_INSTANCE_TYPE], "fake.large");
    assert_eq!(l[LABEL_INSTANCE_TYPE_BETA], "fake.large");
    assert_eq!(l[LABEL_ZONE], "zone-a");
    assert_eq!(l[LABEL_ZONE_BETA], "zone-a");
    assert_eq!(l[LABEL_REGION], "region-1");
    assert_eq!(l[LABEL_REGION_BETA], "region-1");
    assert_eq!(l["pool.example.com/name"], "blue");
    assert!(!l.contains_key("node.kubernetes.io/sneaky"));
    assert_eq!(taints(&node), vec![taint("example.com/keep", "NoExecute")]);
    assert_eq!(addresses(&node), synced_addresses("10.0.0.1"));
    assert_eq!(events.reasons(), vec!["Synced"]);
    assert_eq!(events.all()[0].object, "node-1");
    assert_eq!(cluster.node_writes(), vec!["patch", "patch status"]);
    let mut out = String::new();
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register("delay", "d", metrics.taint_removal_delay.clone());
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    assert!(out.contains("delay_count 1"), "{out}");
}

/// kubelet with `--cloud-provider=external` registers a Node without addresses. On a real
/// kube-apiserver a `$patch: replace` over that empty list is stored as one more, empty address;
/// the status patch must leave exactly the cloud's addresses, dual-stack InternalIPs included.
#[tokio::test]
async fn address_less_node_gets_exactly_the_cloud_addresses() {
    let cluster = Cluster::start().await;
    let mut bare = kubelet_node("node-1");
    bare.status = None;
    cluster.create(bare).await;
    cluster.refresh().await;
    let cloud = fake([instance().internal_ip("fd00::1")]);
    let (c, _events, _metrics) = controller(&cluster, &cloud);

    c.sync_node("node-1").await.expect("sync succeeds");

    let stored = addresses(&cluster.get("node-1").await);
    assert!(
        stored
            .iter()
            .all(|a| !a.type_.is_empty() && !a.address.is_empty()),
        "an empty address was stored: {stored:?}"
    );
    assert_eq!(
        stored,
        vec![
            addr("InternalIP", "10.0.0.1"),
            addr("ExternalIP", "203.0.113.1"),
            addr("InternalIP", "fd00::1"),
        ]
    );
}

#[tokio::test]
async fn missing_node_is_done() {
    let cluster = Cluster::start().await;
    let cloud = fake([instance()]);
    let (c, events, _) = controller(&cluster, &cloud);
    c.sync_node("nope")
        .await
        .expect("missing node is not an error");
    assert!(cloud.calls().is_empty());
    assert!(cluster.node_writes().is_empty());
    assert!(events.reasons().is_empty());
}

#[tokio::test]
async fn initialized_node_gets_ga_labels_only() {
    let cluster = Cluster::start().await;
    let cloud = fake([instance()]);
    let node = with_label(
        with_label(
            initialized_node("node-1", "fake://node-1"),
            LABEL_ZONE_BETA,
            "old-zone",
        ),
        LABEL_INSTANCE_TYPE_BETA,
        "t1",
    );
    let node = with_label(node, LABEL_INSTANCE_TYPE, "t1");
    cluster.create(node).await;
    cluster.refresh().await;
    cluster.env.clear_requests();
    let (c, events, _) = controller(&cluster, &cloud);

    c.sync_node("node-1").await.expect("sync succeeds");

    let l = labels(&cluster.get("node-1").await);
    assert_eq!(l[LABEL_ZONE], "old-zone", "GA twin copied from beta");
    assert!(!l.contains_key(LABEL_REGION));
    assert!(
        cloud.calls().is_empty(),
        "initialized nodes cost no cloud call"
    );
    assert_eq!(cluster.node_writes(), vec!["patch"]);
    assert!(events.reasons().is_empty());

    // Nothing left to reconcile: no write at all.
    cluster.refresh().await;
    cluster.env.clear_requests();
    c.sync_node("node-1").await.expect("sync succeeds");
    assert!(cluster.node_writes().is_empty());
}

#[tokio::test]
async fn nil_metadata_leaves_taint() {
    let cluster = registered().await;
    // A pending instance has no metadata yet (InstancesV2 answers `None`).
    let cloud = fake([instance().state(InstanceState::Pending)]);
    let (c, events, _) = controller(&cluster, &cloud);
    c.sync_node("node-1")
        .await
        .expect("nil metadata is not an error");
    assert!(cluster.node_writes().is_empty());
    assert!(events.reasons().is_empty());
}

#[tokio::test]
async fn node_that_never_gets_a_provider_id_keeps_taint() {
    let cluster = registered().await;
    // A cloud whose metadata carries no provider ID (not re-validated by the fake).
    let cloud = fake([instance()]);
    cloud
        .update_instance("node-1", |i| i.provider_id.clear())
        .expect("node-1 exists");
    let (c, events, _) = controller(&cluster, &cloud);
    for _ in 0..3 {
        let err = c.sync_node("node-1").await.expect_err("no provider ID");
        assert!(
            err.to_string().contains("does not set node provider ID"),
            "{err}"
        );
    }
    assert!(cluster.node_writes().is_empty());
    let node = cluster.get("node-1").await;
    assert!(
        taints(&node)
            .iter()
            .any(|t| t.key == UNINITIALIZED_TAINT_KEY)
    );
    assert!(events.reasons().is_empty());
}

#[tokio::test]
async fn invalid_provided_node_ip_keeps_taint_and_valid_one_orders_addresses() {
    let cluster = Cluster::start().await;
    let cloud = fake([instance().internal_ip("10.0.0.2")]);
    cluster
        .create(with_annotation(
            kubelet_node("node-1"),
            PROVIDED_NODE_IP_ANNOTATION,
            "10.9.9.9",
        ))
        .await;
    cluster.refresh().await;
    cluster.env.clear_requests();
    let (c, _, _) = controller(&cluster, &cloud);

    let err = c
        .sync_node("node-1")
        .await
        .expect_err("node IP matches nothing");
    assert!(matches!(err, NodeSyncError::InvalidNodeIp { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("provided node ip for node node-1 is not valid")
    );
    assert!(cluster.node_writes().is_empty());

    // kubelet fixed: the node IP now matches the second InternalIP, which goes first and
    // replaces the other InternalIP.
    cluster
        .api
        .patch(
            "node-1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {PROVIDED_NODE_IP_ANNOTATION: "10.0.0.2"}}}),
            ),
        )
        .await
        .unwrap();
    cluster.refresh().await;
    c.sync_node("node-1").await.expect("sync succeeds");
    let node = cluster.get("node-1").await;
    assert_eq!(addresses(&node), synced_addresses("10.0.0.2"));
}

/// A cache that serves a stale copy first, as an informer that has not yet seen the latest
/// write does, then the current one.
struct StaleThenFresh {
    stale: Arc<Node>,
    fresh: Arc<Node>,
    calls: parking_lot::Mutex<u32>,
}

impl NodeLister for StaleThenFresh {
    fn get(&self, _: &str) -> Option<Arc<Node>> {
        let mut calls = self.calls.lock();
        *calls += 1;
        Some(if *calls <= 2 {
            self.stale.clone()
        } else {
            self.fresh.clone()
        })
    }
    fn list(&self) -> Vec<Arc<Node>> {
        vec![self.fresh.clone()]
    }
}

/// A stale cache is no conflict: the initialization patch tests only the taints it replaces, so
/// another writer's change (a label here, kubelet's heartbeats in a cluster) between the cache
/// read and the write costs no 409 and no retry, and survives.
#[tokio::test]
async fn a_stale_cache_costs_no_conflict() {
    let cluster = Cluster::start().await;
    let cloud = fake([instance()]);
    let kubelet = with_label(kubelet_node("node-1"), "kubernetes.io/hostname", "node-1");
    let stale = cluster.create(kubelet).await;
    // Someone else writes the Node after our cache saw it.
    let fresh = cluster
        .api
        .patch(
            "node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .unwrap();
    let lister = Arc::new(StaleThenFresh {
        stale: Arc::new(stale),
        fresh: Arc::new(fresh),
        calls: Default::default(),
    });
    cluster.env.clear_requests();
    let (c, events, _) = controller_with(&cluster, Arc::new(cloud.clone()), lister.clone());

    c.sync_node("node-1").await.expect("synced");

    assert_eq!(cluster.node_writes(), vec!["patch", "patch status"]);
    assert!(
        cluster.env.requests().iter().all(|r| r.status < 400),
        "a request failed: {:?}",
        cluster.env.requests()
    );
    let node = cluster.get("node-1").await;
    assert_eq!(
        labels(&node)["team"],
        "a",
        "the other writer's change survives"
    );
    assert_eq!(provider_id(&node).as_deref(), Some("fake://node-1"));
    assert_eq!(events.reasons(), vec!["Synced"]);
}

/// When the taints themselves changed since the cache read, the guarded patch fails its test
/// (422) and is retried over a fresh read from the API server: the other writer's taint stays
/// and only the uninitialized one goes.
#[tokio::test]
async fn changed_taints_are_retried_over_a_fresh_read() {
    let cluster = Cluster::start().await;
    let cloud = fake([instance()]);
    let stale = cluster.create(kubelet_node("node-1")).await;
    let mut with_taint = cluster.get("node-1").await;
    let spec = with_taint.spec.get_or_insert_with(Default::default);
    spec.taints
        .get_or_insert_with(Vec::new)
        .push(taint("example.com/new", "NoSchedule"));
    let fresh = cluster
        .api
        .replace("node-1", &Default::default(), &with_taint)
        .await
        .unwrap();
    // The cache stays stale for the retry too: the retry must read the API server.
    let lister = Arc::new(StaleThenFresh {
        stale: Arc::new(stale.clone()),
        fresh: Arc::new(stale),
        calls: Default::default(),
    });
    assert_ne!(fresh.metadata.resource_version, None);
    cluster.env.clear_requests();
    let (c, _, _) = controller_with(&cluster, Arc::new(cloud.clone()), lister);

    c.sync_node("node-1").await.expect("retried");

    let statuses: Vec<(String, u16)> = cluster
        .env
        .requests()
        .iter()
        .filter(|r| r.resource == "nodes" && r.subresource.is_none())
        .map(|r| (r.verb.clone(), r.status))
        .collect();
    assert_eq!(
        statuses,
        vec![
            ("patch".into(), 422),
            ("get".into(), 200),
            ("patch".into(), 200)
        ]
    );
    let node = cluster.get("node-1").await;
    assert_eq!(
        taints(&node),
        vec![
            taint("example.com/keep", "NoExecute"),
            taint("example.com/new", "NoSchedule")
        ]
    );
    assert_eq!(provider_id(&node).as_deref(), Some("fake://node-1"));
}

#[tokio::test]
async fn node_deleted_mid_sync_ends_quietly() {
    let cluster = Cluster::start().await;
    let cloud = fake([instance()]);
    cluster.create(kubelet_node("node-1")).await;
    cluster.refresh().await;
    // Deleted in the API; the cache has not caught up yet.
    cluster
        .api
        .delete("node-1", &DeleteParams::default())
        .await
        .unwrap();
    let (c, events, _) = controller(&cluster, &cloud);
    c.sync_node("node-1").await.expect("deleted node is done");
    assert!(events.reasons().is_empty());
    assert!(cluster.get_opt("node-1").await.is_none());
}

#[tokio::test]
async fn cloud_errors_keep_the_taint_and_carry_retry_after() {
    let cluster = registered().await;
    let cloud = fake([instance()]);
    let (c, events, _) = controller(&cluster, &cloud);

    cloud.fail(
        Method::InstanceMetadata,
        FaultSpec::other("cloud API down").times(1),
    );
    let err = c.sync_node("node-1").await.expect_err("cloud error");
    assert!(matches!(err, NodeSyncError::Metadata { .. }), "{err}");
    assert_eq!(err.retry_after(), None);

    cloud.fail(
        Method::InstanceMetadata,
        FaultSpec::retry("throttled", Duration::from_secs(7)).times(1),
    );
    let err = c
        .sync_node("node-1")
        .await
        .expect_err("cloud asks to retry");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));

    // Unknown instance: initialization keeps failing; deletion is the lifecycle controller's job.
    cloud.remove_instance("node-1");
    assert!(c.sync_node("node-1").await.is_err());
    assert!(cluster.node_writes().is_empty());
    assert!(cluster.get_opt("node-1").await.is_some());
    assert!(events.reasons().is_empty());
}

#[tokio::test]
async fn legacy_instances_and_zones_path() {
    let cluster = Cluster::start().await;
    let cloud = legacy_fake([instance()]);
    cluster.create(kubelet_node("node-1")).await;
    cluster.refresh().await;
    let (c, events, _) = controller(&cluster, &cloud);
    c.sync_node("node-1").await.expect("sync succeeds");
    let node = cluster.get("node-1").await;
    assert_eq!(provider_id(&node).as_deref(), Some("fake://node-1"));
    assert_eq!(labels(&node)[LABEL_ZONE], "zone-a");
    assert_eq!(addresses(&node).len(), 3);
    assert!(cloud.calls_to(Method::InstanceMetadata).is_empty());
    assert!(!cloud.calls_to(Method::GetZoneByProviderID).is_empty());
    assert_eq!(events.reasons(), vec!["Synced"]);
}

#[tokio::test]
async fn periodic_refresh_updates_addresses() {
    let cluster = Cluster::start().await;
    let cloud = fake([
        instance(),
        FakeInstance::new("node-2").internal_ip("10.0.0.2"),
    ]);
    let mut ready = initialized_node("node-1", "fake://node-1");
    ready.status = Some(Default::default());
    ready.status.as_mut().unwrap().addresses = Some(vec![
        addr("InternalIP", "10.0.0.1"),
        addr("InternalIP", "10.0.0.99"),
        addr("Hostname", "kubelet-host"),
    ]);
    cluster.create(ready).await;
    cluster.create(kubelet_node("node-2")).await;
    cluster.refresh().await;
    cluster.env.clear_requests();
    let (c, _, _) = controller(&cluster, &cloud);

    c.update_node_status(2).await;

    let node = cluster.get("node-1").await;
    assert_eq!(
        addresses(&node),
        synced_addresses("10.0.0.1"),
        "the whole list is replaced, not merged"
    );
    assert_eq!(cluster.node_writes(), vec!["patch status"]);
    assert!(
        cloud.calls().iter().all(|call| call.key != "node-2"),
        "uninitialized nodes are left to sync_node"
    );

    // Unchanged addresses: no write.
    cluster.refresh().await;
    cluster.env.clear_requests();
    c.update_node_status(2).await;
    assert!(cluster.node_writes().is_empty());

    // An instance without metadata yet (InstancesV2 answers `None`) is skipped instead of
    // crashing, though the cloud now reports another address for it.
    cloud
        .update_instance("node-1", |i| {
            *i = instance()
                .provider_id("fake://node-1")
                .internal_ip("10.0.0.3")
                .state(InstanceState::Pending)
        })
        .expect("node-1 exists");
    c.update_node_status(1).await;
    assert!(cluster.node_writes().is_empty());
}

#[tokio::test]
async fn controllers_refuse_a_cloud_without_instances() {
    let cluster = Cluster::start().await;
    let no_instances = Facets {
        instances_v2: false,
        instances: false,
        ..Facets::all()
    };
    let cloud = fake_with(no_instances, []);
    // Both node controllers are built from `NodeParts`, which refuses the cloud.
    let err = NodeParts::new(
        Arc::new(cloud),
        cluster.api.clone(),
        cluster.lister.clone(),
        Arc::new(RecordedEvents::default()),
    )
    .err()
    .expect("no instances facet");
    assert!(
        err.to_string()
            .contains("neither InstancesV2 nor Instances"),
        "{err}"
    );
}
