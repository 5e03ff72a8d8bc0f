//! The watch-based route mode end to end (gate `CloudControllerManagerWatchBasedRoutesReconciliation`,
//! KEP-5237): with the periodic loop set to an hour, routes still follow Node events, and a burst
//! of Node events costs one pass, not one per Node.

use std::sync::Arc;
use std::time::Duration;

use cloud_controllers::app::{CloudControllerManager, CloudManagerOptions};
use fake_cloud::{FakeCloud, Method};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use kube_testenv::TestEnv;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const CLOUD: &str = r#"
facets: {loadBalancer: false, instancesV2: true, instances: false, zones: false, routes: true, clusters: false}
"#;
const WAIT: Duration = Duration::from_secs(60);

async fn add_node(nodes: &Api<Node>, name: &str, cidr: &str) {
    let node = json!({"metadata": {"name": name}, "spec": {"podCIDR": cidr, "podCIDRs": [cidr]}});
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(node).unwrap(),
        )
        .await
        .unwrap();
}

/// Waits until the cloud has a route for each of `cidrs`.
async fn routes_for(cloud: &FakeCloud, cidrs: &[&str]) {
    let all = || {
        let table = cloud.route_table("kubernetes");
        cidrs
            .iter()
            .all(|c| table.iter().any(|r| r.destination_cidr == *c))
    };
    tokio::time::timeout(WAIT, async {
        while !all() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "routes for {cidrs:?}: {:?}",
            cloud.route_table("kubernetes")
        )
    });
}

#[tokio::test]
async fn routes_follow_node_events_with_one_pass_per_burst() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    add_node(&nodes, "n1", "10.244.1.0/24").await;

    let cloud = FakeCloud::from_config(CLOUD.as_bytes()).unwrap();
    let options = CloudManagerOptions::from_args([
        "--cloud-provider=fake",
        "--leader-elect=false",
        "--secure-port=0",
        "--controllers=route",
        "--cluster-cidr=10.244.0.0/16",
        // Ignored in this mode: were it used, no second pass would come within the test.
        "--route-reconciliation-period=1h",
        "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
    ])
    .unwrap();
    let stop = CancellationToken::new();
    let run = CloudControllerManager::new("route-watch-test", options)
        .with_cloud(Arc::new(cloud.clone()))
        .with_client_config(env.config())
        .without_telemetry()
        .run(stop.clone());
    let task = tokio::spawn(run);

    routes_for(&cloud, &["10.244.1.0/24"]).await;
    let first_passes = cloud.calls_to(Method::ListRoutes).len();
    assert_eq!(first_passes, 1, "the initial Node add is one pass");

    // Three Nodes join at once: their events coalesce into the one key, and the bucket lets the
    // next pass run once, at most 10 s after the first.
    for (name, cidr) in [
        ("n2", "10.244.2.0/24"),
        ("n3", "10.244.3.0/24"),
        ("n4", "10.244.4.0/24"),
    ] {
        add_node(&nodes, name, cidr).await;
    }
    routes_for(&cloud, &["10.244.2.0/24", "10.244.3.0/24", "10.244.4.0/24"]).await;
    let passes = cloud.calls_to(Method::ListRoutes).len();
    assert_eq!(passes, 2, "three Node adds within 10 s make one more pass");

    stop.cancel();
    task.await.unwrap().unwrap();
}
