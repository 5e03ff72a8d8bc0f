//! The stock initializer map under the manager, against kube-testenv and the fake cloud: upstream
//! names and aliases, "not started" for every missing facet, and a start-up error that says what
//! to set when the route controller has no `--cluster-cidr`.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cloud_controllers::cloud::CloudProvider;
use cloud_controllers::options::CloudOptions;
use cloud_controllers::{CloudContext, cloud_initializers};
use controller_manager::manager::{ControllerSelection, Manager, ManagerConfig, ManagerError};
use fake_cloud::{Facets, FakeCloud};
use kube_testenv::TestEnv;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    cloud: CloudOptions,
}

fn options(args: &[&str]) -> CloudOptions {
    let mut argv = vec!["test", "--cloud-provider=fake"];
    argv.extend_from_slice(args);
    Flags::parse_from(argv).cloud
}

fn cloud(facets: Facets) -> Arc<dyn CloudProvider> {
    Arc::new(FakeCloud::builder().facets(facets).build().unwrap())
}

#[test]
fn upstream_names_and_aliases_are_registered_and_all_on_by_default() {
    let known = cloud_initializers().known();
    let all = ControllerSelection::parse(&["*".to_string()], &known).unwrap();
    for name in [
        "cloud-node-controller",
        "cloud-node-lifecycle-controller",
        "service-lb-controller",
        "node-route-controller",
    ] {
        assert!(all.is_enabled(name), "{name} runs under '*'");
    }
    let picked =
        ControllerSelection::parse(&["cloud-node".to_string(), "service".to_string()], &known)
            .unwrap();
    assert!(picked.is_enabled("cloud-node-controller"));
    assert!(picked.is_enabled("service-lb-controller"));
    assert!(!picked.is_enabled("node-route-controller"));
    assert!(!picked.is_enabled("cloud-node-lifecycle-controller"));
    let without_route =
        ControllerSelection::parse(&["*".to_string(), "-route".to_string()], &known).unwrap();
    assert!(!without_route.is_enabled("node-route-controller"));
    assert!(cloud_initializers().check().is_ok());
}

/// Cancels `stop`; the manager task `run` must then return `Ok` within 20 s.
async fn shut_down(stop: &CancellationToken, run: JoinHandle<Result<(), ManagerError>>) {
    stop.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(20), run).await;
    stopped.unwrap().unwrap().unwrap();
}

#[tokio::test]
async fn controllers_without_their_facet_are_not_started() {
    let env = TestEnv::start().await.unwrap();
    let mut config = ManagerConfig::new("test");
    config.cache_sync_timeout = Duration::from_secs(20);
    let manager = Manager::new(
        config,
        env.client(),
        CloudContext::new(cloud(Facets::none()), options(&[])),
    )
    .with_initializers(cloud_initializers());
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));
    // With no facet every controller reports "not started", so no informer is ever requested.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !env.requests().iter().any(|r| r.verb == "watch"),
        "no controller started, so nothing is watched: {:?}",
        env.requests()
    );
    shut_down(&stop, run).await;
}

#[tokio::test]
async fn route_controller_without_cluster_cidr_stops_start_up_with_what_to_set() {
    let env = TestEnv::start().await.unwrap();
    let manager = Manager::new(
        ManagerConfig::new("test"),
        env.client(),
        CloudContext::new(cloud(Facets::all()), options(&[])),
    )
    .with_initializers(cloud_initializers());
    let err = manager.run(CancellationToken::new()).await.unwrap_err();
    assert!(matches!(err, ManagerError::Init { ref name, .. } if name == "node-route-controller"));
    assert!(err.to_string().contains("--cluster-cidr"), "{err}");

    // --configure-cloud-routes=false skips the controller instead, as upstream.
    let manager = Manager::new(
        ManagerConfig::new("test"),
        env.client(),
        CloudContext::new(
            cloud(Facets::all()),
            options(&["--configure-cloud-routes=false"]),
        ),
    )
    .with_initializers(cloud_initializers());
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    shut_down(&stop, run).await;
}
