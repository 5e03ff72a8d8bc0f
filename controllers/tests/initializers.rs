//! The stock initializer map under the manager, against kube-testenv and the fake cloud: upstream
//! names and aliases, "not started" for every missing facet, and a start-up error that says what
//! to set when the route controller has no `--cluster-cidr`, found before anything starts.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cloud_controllers::app::{AppError, CloudControllerManager, CloudManagerOptions};
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
    assert!(matches!(err, ManagerError::Requirements(_)), "{err:?}");
    assert!(
        err.to_string().starts_with(
            "cannot start: controller \"node-route-controller\": --cluster-cidr is empty"
        ),
        "{err}"
    );
    // Refused before anything started: not one request (no Lease, no list, no watch).
    assert_eq!(env.requests().len(), 0, "{:?}", env.requests());

    // Only selected controllers are checked: without the route controller the flags are fine.
    let mut config = ManagerConfig::new("test");
    config.controllers = vec!["*".into(), "-route".into()];
    let manager = Manager::new(
        config,
        env.client(),
        CloudContext::new(cloud(Facets::all()), options(&[])),
    )
    .with_initializers(cloud_initializers());
    assert!(manager.validate().is_ok());

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

/// The embedder's path (issue 23): `CloudControllerManager::run` with leader election on and the
/// default `--controllers=*` returns the route controller's requirement at once, instead of
/// taking the Lease and holding the error in a spawned task, and exits 1.
#[tokio::test]
async fn the_app_refuses_an_unmet_requirement_at_once_and_takes_no_lease() {
    let env = TestEnv::start().await.unwrap();
    let options = CloudManagerOptions::from_args([
        "--cloud-provider=fake",
        "--leader-elect=true",
        "--secure-port=0",
    ])
    .unwrap();
    let run = CloudControllerManager::new("requirements-test", options)
        .with_cloud(cloud(Facets::all()))
        .with_client_config(env.config())
        .without_telemetry()
        .run(CancellationToken::new());
    let err = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("run() returns at once")
        .unwrap_err();
    assert!(
        matches!(err, AppError::Manager(ManagerError::Requirements(_))),
        "{err:?}"
    );
    assert!(err.to_string().contains("--cluster-cidr"), "{err}");
    assert_eq!(err.exit_code(), std::process::ExitCode::FAILURE);
    assert_eq!(env.requests().len(), 0, "{:?}", env.requests());
}
