//! A provider that panics does not stop the controllers (issue 13): the real manager with the
//! stock controllers and leader election on, over kube-testenv and the fake cloud, whose
//! `ListRoutes`, `UpdateLoadBalancer` and `InstanceMetadata` are made to panic.
//!
//! - the periodic loops' panicking runs (route reconcile: `ListRoutes`; cloud-node's address
//!   refresh: `InstanceMetadata`) are logged, counted in
//!   `controller_runtime_reconcile_panics_total{controller=<loop name>}` (the canonical name;
//!   `cloud-node-controller/address-refresh` for the refresh), the next runs start on
//!   schedule, and `/healthz/<controller>` fails (saying the last run panicked) until a run
//!   completes;
//! - a panicking `UpdateLoadBalancer` (node sync) and `InstanceMetadata` (the cloud-node
//!   reconcile of a new Node) are caught per reconcile and counted; the controllers go on and the
//!   new Node is initialized on retry.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cloud_controllers::cloud::CloudProvider;
use cloud_controllers::options::CloudOptions;
use cloud_controllers::{CloudContext, cloud_initializers};
use controller_manager::admin::HealthChecks;
use controller_manager::leader::LeaderElectionConfig;
use controller_manager::manager::{Manager, ManagerConfig};
use fake_cloud::{FakeCloud, FakeInstance, FaultSpec, Method};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::PostParams;
use kube_testenv::TestEnv;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);
const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    cloud: CloudOptions,
}

fn node(i: usize) -> Node {
    serde_json::from_value(json!({
        "metadata": { "name": format!("node-{i}") },
        "spec": {
            "podCIDR": format!("10.244.{i}.0/24"),
            "podCIDRs": [format!("10.244.{i}.0/24")],
            "taints": [{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }]
        }
    }))
    .expect("node")
}

fn instance(i: usize) -> FakeInstance {
    FakeInstance::new(format!("node-{i}"))
        .provider_id(format!("fake://node-{i}"))
        .internal_ip(format!("10.0.0.{}", i + 1))
}

fn lb_service() -> Service {
    serde_json::from_value(json!({
        "metadata": { "name": "web", "namespace": "default" },
        "spec": { "type": "LoadBalancer", "selector": { "app": "web" },
                  "ports": [{ "port": 80, "protocol": "TCP" }] }
    }))
    .expect("service")
}

/// `controller_runtime_reconcile_panics_total` for `controller`, 0 when absent.
fn panics(registry: &Mutex<Registry>, controller: &str) -> u64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry.lock()).expect("encode");
    let series =
        format!("controller_runtime_reconcile_panics_total{{controller=\"{controller}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .map_or(0, |v| v.trim().parse().expect("counter value"))
}

async fn until<F: std::future::Future<Output = bool>>(what: &str, mut cond: impl FnMut() -> F) {
    tokio::time::timeout(WAIT, async {
        while !cond().await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out: {what}"));
}

fn initialized(node: &Node) -> bool {
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED));
    !tainted
}

async fn check(health: &HealthChecks, name: &str) -> Result<(), String> {
    health.run_one(name).await.expect("check registered")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_provider_calls_are_survived_counted_and_reported() {
    let env = TestEnv::start().await.expect("testenv");
    let nodes: Api<Node> = Api::all(env.client());
    nodes
        .create(&PostParams::default(), &node(0))
        .await
        .expect("node-0");
    let cloud = FakeCloud::builder()
        .instance(instance(0))
        .instance(instance(1))
        .build()
        .expect("cloud");

    let mut config = ManagerConfig::new("cloud-controller-manager");
    config.cache_sync_timeout = WAIT;
    let le = LeaderElectionConfig::new("kube-system", "cloud-controller-manager", "a")
        .with_durations(
            Duration::from_secs(2),
            Duration::from_secs(1),
            Duration::from_millis(200),
        );
    config.leader_election = Some(le);
    let opts = Flags::parse_from([
        "test",
        "--cluster-cidr=10.244.0.0/16",
        "--route-reconciliation-period=1s",
        "--node-status-update-frequency=1s",
    ])
    .cloud;
    let provider: Arc<dyn CloudProvider> = Arc::new(cloud.clone());
    let manager = Manager::new(config, env.client(), CloudContext::new(provider, opts))
        .with_initializers(cloud_initializers());
    let health = manager.health_checks();
    let registry = manager.registry();
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));

    // Steady state: node-0 initialized, its route created, the load balancer ensured.
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    services
        .create(&PostParams::default(), &lb_service())
        .await
        .expect("service");
    tokio::time::timeout(WAIT, cloud.wait_for_calls(Method::CreateRoute, 1))
        .await
        .expect("route for node-0");
    tokio::time::timeout(WAIT, cloud.wait_for_calls(Method::EnsureLoadBalancer, 1))
        .await
        .expect("load balancer");
    until("node-0 initialized", || async {
        nodes.get("node-0").await.is_ok_and(|n| initialized(&n))
    })
    .await;
    assert_eq!(check(&health, "node-route-controller").await, Ok(()));

    // 1. ListRoutes panics on every run: each run is caught and counted, the next one still
    //    comes, and the route controller's check says why it fails.
    cloud.fail(
        Method::ListRoutes,
        FaultSpec::panic("provider bug in ListRoutes"),
    );
    until("two route runs panicked", || async {
        panics(&registry, "node-route-controller") >= 2
    })
    .await;
    let reason = check(&health, "node-route-controller")
        .await
        .expect_err("a panicking route loop is reported");
    assert!(
        reason.contains("last periodic run panicked: provider bug in ListRoutes"),
        "{reason}"
    );
    cloud.clear_faults_for(Method::ListRoutes);
    let listed = cloud.calls_to(Method::ListRoutes).len();
    tokio::time::timeout(WAIT, cloud.wait_for_calls(Method::ListRoutes, listed + 1))
        .await
        .expect("the route loop runs again once the provider behaves");
    until("route check green again", || async {
        check(&health, "node-route-controller").await.is_ok()
    })
    .await;

    // 2. The address refresh's InstanceMetadata for node-0 panics on every run: the same, for
    //    cloud-node's periodic loop (its workers are unaffected, see 3.).
    cloud.fail(
        Method::InstanceMetadata,
        FaultSpec::panic("provider bug in InstanceMetadata").only_for("node-0"),
    );
    until("two refresh runs panicked", || async {
        panics(&registry, "cloud-node-controller/address-refresh") >= 2
    })
    .await;
    let reason = check(&health, "cloud-node-controller")
        .await
        .expect_err("a panicking refresh loop is reported");
    assert!(
        reason.contains("last periodic run panicked: provider bug in InstanceMetadata"),
        "{reason}"
    );
    cloud.clear_faults_for(Method::InstanceMetadata);
    until("cloud-node check green again", || async {
        check(&health, "cloud-node-controller").await.is_ok()
    })
    .await;
    // The refresh's panics count apart from the reconciles' (none so far).
    let refresh_panics = panics(&registry, "cloud-node-controller");

    // 3. A new Node: its first InstanceMetadata and the node sync's first UpdateLoadBalancer
    //    panic; both are caught per reconcile, and the controllers carry on.
    cloud.fail(
        Method::InstanceMetadata,
        FaultSpec::panic("provider bug in InstanceMetadata")
            .times(1)
            .only_for("node-1"),
    );
    cloud.fail(
        Method::UpdateLoadBalancer,
        FaultSpec::panic("provider bug in UpdateLoadBalancer").times(1),
    );
    let updated = cloud.calls_to(Method::UpdateLoadBalancer).len();
    nodes
        .create(&PostParams::default(), &node(1))
        .await
        .expect("node-1");
    until("node-1 initialized after the panicking attempt", || async {
        nodes.get("node-1").await.is_ok_and(|n| initialized(&n))
    })
    .await;
    assert!(
        panics(&registry, "cloud-node-controller") > refresh_panics,
        "the reconcile's InstanceMetadata panic was not counted"
    );
    until("the UpdateLoadBalancer panic is counted", || async {
        panics(&registry, "service-lb-controller/node-sync") >= 1
    })
    .await;
    // node-1's initialization (a new provider ID) triggers another node sync, which succeeds.
    tokio::time::timeout(
        WAIT,
        cloud.wait_for_calls(Method::UpdateLoadBalancer, updated + 1),
    )
    .await
    .expect("node sync goes on after the panic");
    tokio::time::timeout(WAIT, cloud.wait_for_calls(Method::CreateRoute, 2))
        .await
        .expect("route for node-1");

    for name in [
        "cloud-node-controller",
        "cloud-node-lifecycle-controller",
        "service-lb-controller",
        "node-route-controller",
    ] {
        until(name, || async { check(&health, name).await.is_ok() }).await;
    }
    assert!(!run.is_finished(), "the manager stopped");
    stop.cancel();
    tokio::time::timeout(WAIT, run)
        .await
        .expect("stops")
        .expect("task")
        .expect("clean stop");
}
