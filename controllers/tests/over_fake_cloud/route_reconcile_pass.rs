//! Unit tests of the reconcile pass that need no API server: concurrency bound, list failures,
//! and the non-sliding loop under tokio's paused clock.

use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

use std::sync::Arc;
use std::time::Duration;

use cloud_controllers::cloud::CloudProvider;
use cloud_controllers::event_sink::EventSink;
use cloud_controllers::event_sink::RecordedEvents;
use cloud_controllers::node::NodeLister;
use cloud_controllers::route::cidrs::parse_cluster_cidrs;
use cloud_controllers::route::condition::{NETWORK_UNAVAILABLE, REASON_ROUTE_CREATED};
use cloud_controllers::route::{
    MAX_CONCURRENT_ROUTE_OPERATIONS, RouteController, RouteError, RouteMetrics, watch,
};
use controller_manager::controller::layers::ControllerMetrics;
use controller_manager::workqueue::WorkQueue;
use fake_cloud::{FakeCloud, FaultSpec, Method};
use k8s_openapi::api::core::v1::Node;
use prometheus_client::registry::Registry;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

struct Nodes(Vec<Arc<Node>>);

impl NodeLister for Nodes {
    fn list(&self) -> Vec<Arc<Node>> {
        self.0.clone()
    }
}

/// A client that is never reached: every node in these tests already has a current condition.
fn unused_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

/// A node with one pod CIDR whose condition already says `RouteCreated`, so no API write happens.
fn routed_node(i: usize) -> Arc<Node> {
    let mut n = Node {
        spec: Some(NodeSpec {
            pod_cidrs: Some(vec![format!("10.{}.{}.0/24", 100 + i / 256, i % 256)]),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: NETWORK_UNAVAILABLE.into(),
                status: "False".into(),
                reason: Some(REASON_ROUTE_CREATED.into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    n.metadata.name = Some(format!("n{i}"));
    n.metadata.uid = Some(format!("uid-{i}"));
    Arc::new(n)
}

fn controller(cloud: Arc<dyn CloudProvider>, nodes: Vec<Arc<Node>>) -> RouteController {
    RouteController::new(
        cloud,
        unused_client(),
        "k",
        parse_cluster_cidrs("10.0.0.0/8").unwrap(),
        Arc::new(Nodes(nodes)),
        Arc::new(RecordedEvents::default()),
    )
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn at_most_200_cloud_operations_in_flight() {
    let cloud = FakeCloud::new();
    let held = cloud.hold(Method::CreateRoute);
    let nodes: Vec<_> = (0..450).map(routed_node).collect();
    let ctl = controller(Arc::new(cloud.clone()), nodes);
    let pass = tokio::spawn(async move { ctl.reconcile_node_routes().await });
    held.wait_for_calls(MAX_CONCURRENT_ROUTE_OPERATIONS).await;
    // With every permit parked at the gate, the paused clock runs on only once all else is idle:
    // no further create has started.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(held.arrived(), MAX_CONCURRENT_ROUTE_OPERATIONS);
    held.release();
    pass.await.unwrap().unwrap();
    assert_eq!(cloud.call_count(Method::CreateRoute), 450);
}

#[tokio::test]
async fn list_failure_fails_the_pass_and_counts_it() {
    let cloud = FakeCloud::new();
    cloud.fail(Method::ListRoutes, FaultSpec::other("throttled"));
    let metrics = RouteMetrics::default();
    let ctl =
        controller(Arc::new(cloud.clone()), vec![routed_node(1)]).with_metrics(metrics.clone());
    let err = ctl.reconcile_node_routes().await.unwrap_err();
    assert_eq!(err.to_string(), "error listing routes: throttled");
    assert_eq!(metrics.route_sync.get(), 1);
    assert!(cloud.calls_to(Method::CreateRoute).is_empty());
}

#[tokio::test]
async fn needs_routes_facet_and_cidrs() {
    use fake_cloud::Facets;
    let no_routes = FakeCloud::builder().facets(Facets::none()).build().unwrap();
    let events: Arc<dyn EventSink> = Arc::new(RecordedEvents::default());
    let nodes: Arc<dyn NodeLister> = Arc::new(Nodes(vec![]));
    let cidrs = parse_cluster_cidrs("10.0.0.0/8").unwrap();
    let err = RouteController::new(
        Arc::new(no_routes),
        unused_client(),
        "k",
        cidrs,
        nodes.clone(),
        events.clone(),
    );
    assert!(matches!(err, Err(RouteError::RoutesUnsupported)));
    let err = RouteController::new(
        Arc::new(FakeCloud::new()),
        unused_client(),
        "k",
        vec![],
        nodes,
        events,
    );
    assert!(matches!(err, Err(RouteError::NoClusterCidrs)));
}

#[tokio::test(start_paused = true)]
async fn run_is_non_sliding_and_stops_on_shutdown() {
    let cloud = FakeCloud::new();
    let ctl = Arc::new(controller(Arc::new(cloud.clone()), vec![]));
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let (ctl, shutdown) = (ctl.clone(), shutdown.clone());
        let metrics = ControllerMetrics::new(&mut Registry::default());
        async move { ctl.run(Duration::from_secs(10), &metrics, shutdown).await }
    });
    let start = Instant::now();
    // Passes at 0, 10, 20, 30 s.
    tokio::time::sleep_until(start + Duration::from_secs(35)).await;
    assert_eq!(cloud.calls_to(Method::ListRoutes).len(), 4);

    // A pass slower than the period is followed immediately by the next one, not a full period
    // later: passes start at 40 (takes 15 s), 55, 70 with the latency in place.
    cloud.set_latency(Method::ListRoutes, Duration::from_secs(15));
    tokio::time::sleep_until(start + Duration::from_secs(71)).await;
    assert_eq!(
        cloud.calls_to(Method::ListRoutes).len(),
        6,
        "passes finished at 55 and 70"
    );

    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn zero_period_is_raised_to_the_minimum() {
    let cloud = FakeCloud::new();
    let ctl = Arc::new(controller(Arc::new(cloud.clone()), vec![]));
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let (ctl, shutdown) = (ctl.clone(), shutdown.clone());
        let metrics = ControllerMetrics::new(&mut Registry::default());
        async move { ctl.run(Duration::ZERO, &metrics, shutdown).await }
    });
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // Passes at 0, 1 and 2 s: no hot loop.
    assert_eq!(cloud.calls_to(Method::ListRoutes).len(), 3);
    shutdown.cancel();
    task.await.unwrap();
}

/// The watch-based mode is built like every queue-driven cloud controller: a cloud
/// `Retry { after }` fails the pass with the queue's `RetryAfter`, so the next pass runs after
/// exactly `after`. Backing off instead (the `Routes` limiter) would run it within 10 s.
#[tokio::test(start_paused = true)]
async fn watch_based_retry_runs_the_next_pass_after_exactly_the_delay() {
    let after = Duration::from_secs(30);
    let cloud = FakeCloud::new();
    cloud.fail(
        Method::ListRoutes,
        FaultSpec::retry("route quota exhausted", after).times(1),
    );
    let ctl = Arc::new(controller(Arc::new(cloud.clone()), vec![]));
    let queue = WorkQueue::builder(watch::QUEUE_NAME)
        .rate_limiter(watch::pass_rate_limiter())
        .build();
    queue.add_rate_limited(watch::ROUTES_KEY.to_string());
    let metrics = ControllerMetrics::new(&mut Registry::default());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(ctl.run_watch_based(queue, &metrics, shutdown.clone()));

    // Well past the limiter's 10 s and just short of the delay: only the refused pass ran.
    tokio::time::sleep(after - Duration::from_millis(100)).await;
    assert_eq!(cloud.calls_to(Method::ListRoutes).len(), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let calls = cloud.calls_to(Method::ListRoutes);
    assert_eq!(calls.len(), 2, "the pass runs again once the delay is over");
    assert!(!calls[0].outcome.is_ok() && calls[1].outcome.is_ok());
    let gap = calls[1].started - calls[0].finished;
    assert!(
        gap >= after && gap <= after + Duration::from_millis(5),
        "next pass {gap:?} after the refused one, asked for {after:?}"
    );

    shutdown.cancel();
    task.await.unwrap();
}

/// Compile-time check: the wiring spawns these futures on a multi-threaded runtime.
#[test]
fn futures_are_send() {
    fn assert_send<T: Send>(_: T) {}
    fn check(ctl: &RouteController) {
        assert_send(ctl.reconcile_node_routes());
        let metrics = ControllerMetrics::new(&mut Registry::default());
        assert_send(ctl.run(Duration::from_secs(1), &metrics, CancellationToken::new()));
    }
    let _ = check;
}
