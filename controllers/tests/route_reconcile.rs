//! End-to-end tests of the node-route controller: a real `kube::Client` against kube-testenv and
//! the fake cloud's route table. The Node cache is simulated by [`Nodes::refresh`].

use std::sync::Arc;

use cloud_controllers::cloud::Route;
use cloud_controllers::event_sink::{EventType, RecordedEvents};
use cloud_controllers::route::cidrs::parse_cluster_cidrs;
use cloud_controllers::route::{RouteController, RouteError, RouteMetrics};
use cloud_controllers::service::NodeLister;
use fake_cloud::{FakeCloud, FaultSpec, Method};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube_testenv::TestEnv;
use parking_lot::Mutex;
use serde_json::json;

const CLUSTER: &str = "kubernetes";

#[derive(Default)]
struct Nodes(Mutex<Vec<Arc<Node>>>);

impl NodeLister for Nodes {
    fn list(&self) -> Vec<Arc<Node>> {
        self.0.lock().clone()
    }
}

impl Nodes {
    async fn refresh(&self, client: &kube::Client) {
        let list = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        *self.0.lock() = list.items.into_iter().map(Arc::new).collect();
    }
}

struct Harness {
    env: TestEnv,
    client: kube::Client,
    cloud: FakeCloud,
    nodes: Arc<Nodes>,
    events: RecordedEvents,
    metrics: RouteMetrics,
    ctl: RouteController,
}

fn node(name: &str, cidrs: &[&str]) -> Node {
    let mut n = Node {
        spec: Some(NodeSpec {
            pod_cidrs: (!cidrs.is_empty()).then(|| cidrs.iter().map(|c| c.to_string()).collect()),
            pod_cidr: cidrs.first().map(|c| c.to_string()),
            ..Default::default()
        }),
        ..Default::default()
    };
    n.metadata.name = Some(name.into());
    n
}

async fn harness(cluster_cidr: &str, nodes: &[(&str, &[&str])]) -> Harness {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    for (name, cidrs) in nodes {
        Api::<Node>::all(client.clone())
            .create(&PostParams::default(), &node(name, cidrs))
            .await
            .unwrap();
    }
    let cloud = FakeCloud::new();
    let lister = Arc::new(Nodes::default());
    lister.refresh(&client).await;
    let events = RecordedEvents::default();
    let metrics = RouteMetrics::default();
    let ctl = RouteController::new(
        Arc::new(cloud.clone()),
        client.clone(),
        CLUSTER,
        parse_cluster_cidrs(cluster_cidr).unwrap(),
        lister.clone(),
        Arc::new(events.clone()),
    )
    .unwrap()
    .with_metrics(metrics.clone());
    Harness {
        env,
        client,
        cloud,
        nodes: lister,
        events,
        metrics,
        ctl,
    }
}

impl Harness {
    async fn pass(&self) {
        self.nodes.refresh(&self.client).await;
        self.ctl.reconcile_node_routes().await.unwrap();
    }

    fn cidrs(&self) -> Vec<(String, String)> {
        self.cloud
            .route_table(CLUSTER)
            .into_iter()
            .map(|r| (r.target_node, r.destination_cidr))
            .collect()
    }

    async fn condition(&self, name: &str) -> Option<NodeCondition> {
        let node = Api::<Node>::all(self.client.clone())
            .get(name)
            .await
            .unwrap();
        node.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "NetworkUnavailable")
    }

    /// Asserts that `name` has a NetworkUnavailable condition with `status` and `reason`.
    async fn assert_condition(&self, name: &str, status: &str, reason: &str) -> NodeCondition {
        let c = self.condition(name).await.expect("condition written");
        let got = (c.status.as_str(), c.reason.as_deref());
        assert_eq!(got, (status, Some(reason)), "{name}");
        c
    }

    fn node_status_patches(&self) -> usize {
        self.env
            .requests()
            .iter()
            .filter(|r| {
                r.verb == "patch"
                    && r.resource == "nodes"
                    && r.subresource.as_deref() == Some("status")
            })
            .count()
    }
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<_> = v
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    v.sort_by(|a, b| a.1.cmp(&b.1));
    v
}

/// A route as a cloud lists it: always named.
fn route(target: &str, cidr: &str) -> Route {
    Route {
        name: format!("seeded-{target}-{cidr}"),
        target_node: target.into(),
        destination_cidr: cidr.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn creates_dual_stack_routes_and_reports_route_created() {
    let h = harness(
        "10.244.0.0/16,fd00:10:244::/56",
        &[
            ("n1", &["10.244.1.0/24"]),
            ("n2", &["10.244.2.0/24", "fd00:10:244:2::/64"]),
        ],
    )
    .await;
    h.pass().await;
    assert_eq!(
        h.cidrs(),
        pairs(&[
            ("n1", "10.244.1.0/24"),
            ("n2", "10.244.2.0/24"),
            ("n2", "fd00:10:244:2::/64")
        ])
    );
    let n1_uid = Api::<Node>::all(h.client.clone())
        .get("n1")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    assert!(
        h.cloud.route_table(CLUSTER)[0].name.contains(&n1_uid),
        "node UID is the name hint"
    );
    for n in ["n1", "n2"] {
        let c = h.assert_condition(n, "False", "RouteCreated").await;
        assert_eq!(
            c.message.as_deref(),
            Some("RouteController created a route")
        );
        assert!(c.last_transition_time.is_some() && c.last_heartbeat_time.is_some());
    }
    assert_eq!(h.metrics.route_sync.get(), 1);

    // A second pass changes nothing: no cloud writes, no condition writes.
    h.cloud.clear_calls();
    h.env.clear_requests();
    h.pass().await;
    assert!(h.cloud.calls_to(Method::CreateRoute).is_empty());
    assert!(h.cloud.calls_to(Method::DeleteRoute).is_empty());
    assert_eq!(h.node_status_patches(), 0);
}

#[tokio::test]
async fn deletes_stale_and_blackholed_routes_and_leaves_foreign_ones() {
    let h = harness("10.244.0.0/16", &[("n1", &["10.244.1.0/24"])]).await;
    h.cloud.add_route(CLUSTER, route("gone", "10.244.9.0/24"));
    h.cloud.add_route(CLUSTER, route("gone", "192.168.0.0/24"));
    h.cloud.add_route(CLUSTER, route("", "10.244.8.0/24"));
    h.cloud.add_route(CLUSTER, route("n1", "10.244.1.0/24"));
    assert!(h.cloud.set_route_blackhole(CLUSTER, "10.244.1.0/24", true));

    h.pass().await;
    // Blackholed route of a live node: deleted now, recreated by the next pass (upstream order).
    assert_eq!(h.cidrs(), pairs(&[("gone", "192.168.0.0/24")]));
    h.pass().await;
    assert_eq!(
        h.cidrs(),
        pairs(&[("n1", "10.244.1.0/24"), ("gone", "192.168.0.0/24")])
    );
    assert!(!h.cloud.route_table(CLUSTER).iter().any(|r| r.blackhole));
}

#[tokio::test]
async fn failed_create_emits_event_and_marks_network_unavailable() {
    let h = harness(
        "10.244.0.0/16",
        &[("n1", &["10.244.1.0/24"]), ("n2", &["10.244.2.0/24"])],
    )
    .await;
    h.cloud.fail(
        Method::CreateRoute,
        FaultSpec::other("route quota exceeded").only_for("n1"),
    );
    h.pass().await;

    let events = h.events.all();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].reason, "FailedToCreateRoute");
    assert_eq!(events[0].type_, EventType::Warning);
    assert_eq!(events[0].object, "n1");
    assert!(
        events[0].message.contains("10.244.1.0/24")
            && events[0].message.contains("route quota exceeded"),
        "{}",
        events[0].message
    );
    let c = h.assert_condition("n1", "True", "NoRouteCreated").await;
    assert_eq!(
        c.message.as_deref(),
        Some("RouteController failed to create a route")
    );
    let c = h.condition("n2").await.unwrap();
    assert_eq!(c.status, "False");

    h.cloud.clear_faults();
    h.pass().await;
    h.assert_condition("n1", "False", "RouteCreated").await;
}

#[tokio::test]
async fn cni_condition_with_another_reason_is_overwritten() {
    let h = harness("10.244.0.0/16", &[("n1", &["10.244.1.0/24"])]).await;
    h.cloud.add_route(CLUSTER, route("n1", "10.244.1.0/24"));
    let cni = json!({"status": {"conditions": [{
        "type": "NetworkUnavailable", "status": "False", "reason": "CalicoIsUp", "message": "Calico is running",
        "lastTransitionTime": "2026-01-01T00:00:00Z", "lastHeartbeatTime": "2026-01-01T00:00:00Z",
    }]}});
    Api::<Node>::all(h.client.clone())
        .patch_status("n1", &PatchParams::default(), &Patch::Strategic(&cni))
        .await
        .unwrap();
    h.pass().await;
    h.assert_condition("n1", "False", "RouteCreated").await;
}

#[tokio::test]
async fn nodes_without_pod_cidrs() {
    // n3 has a route but no pod CIDRs: route deleted, NetworkUnavailable=True.
    // n4 has neither: no condition is written.
    let h = harness("10.244.0.0/16", &[("n3", &[]), ("n4", &[])]).await;
    h.cloud.add_route(CLUSTER, route("n3", "10.244.3.0/24"));
    h.pass().await;
    assert!(h.cidrs().is_empty());
    h.assert_condition("n3", "True", "NoRouteCreated").await;
    assert!(h.condition("n4").await.is_none());
}

#[tokio::test]
async fn list_failure_fails_the_pass() {
    let h = harness("10.244.0.0/16", &[("n1", &["10.244.1.0/24"])]).await;
    h.cloud
        .fail(Method::ListRoutes, FaultSpec::other("throttled").times(1));
    let err = h.ctl.reconcile_node_routes().await.unwrap_err();
    assert!(matches!(err, RouteError::ListRoutes(_)), "{err}");
    assert!(h.condition("n1").await.is_none());
    h.pass().await;
    assert_eq!(h.cidrs(), pairs(&[("n1", "10.244.1.0/24")]));
}

#[tokio::test]
async fn deleted_node_mid_pass_is_only_logged() {
    let h = harness(
        "10.244.0.0/16",
        &[("n1", &["10.244.1.0/24"]), ("n2", &["10.244.2.0/24"])],
    )
    .await;
    h.nodes.refresh(&h.client).await;
    Api::<Node>::all(h.client.clone())
        .delete("n1", &Default::default())
        .await
        .unwrap();
    // The cache still has n1: its route is created, its condition patch 404s and is logged.
    h.ctl.reconcile_node_routes().await.unwrap();
    assert_eq!(h.condition("n2").await.unwrap().status, "False");
    // Once the cache catches up, the route of the vanished node goes away.
    h.pass().await;
    assert_eq!(h.cidrs(), pairs(&[("n2", "10.244.2.0/24")]));
}

#[tokio::test]
async fn condition_write_conflicts_are_retried_other_errors_logged() {
    let h = harness("10.244.0.0/16", &[("n1", &["10.244.1.0/24"])]).await;
    h.env.clear_requests();
    h.env.faults().fail_next(1, 409, None);
    h.ctl.reconcile_node_routes().await.unwrap();
    let codes: Vec<u16> = h
        .env
        .requests()
        .iter()
        .filter(|r| r.resource == "nodes" && r.subresource.as_deref() == Some("status"))
        .map(|r| r.status)
        .collect();
    assert_eq!(codes, [409, 200], "conflict retried");
    assert_eq!(h.condition("n1").await.unwrap().status, "False");

    let h = harness("10.244.0.0/16", &[("n1", &["10.244.1.0/24"])]).await;
    h.env.faults().fail_next(1, 500, None);
    h.ctl.reconcile_node_routes().await.unwrap();
    assert!(
        h.condition("n1").await.is_none(),
        "500 is not retried within the pass"
    );
    h.ctl.reconcile_node_routes().await.unwrap();
    assert_eq!(h.condition("n1").await.unwrap().status, "False");
}
