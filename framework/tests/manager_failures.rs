//! A replica never holds the Lease while doing nothing (issue 13), end to end over HTTP against
//! kube-testenv with leader election **on** (and, for start-up, off as well):
//! - a failure after the Lease is won that stops a controller from starting (initializer error,
//!   start hook error, cache-sync timeout) ends `Manager::run` with that error and releases the
//!   Lease (also for a warm standby's start hook);
//! - a controller whose task returns or panics while the manager runs stops the manager with
//!   `ControllerStopped`; meanwhile its `/healthz/<name>` check fails and
//!   `running_managed_controllers` reads 0;
//! - a controller that spends all of the process's QPS does not cost the leader its Lease: the
//!   renewals have a client and limiter of their own, as upstream's `leader-election` client.

use std::sync::Arc;
use std::time::Duration;

use controller_manager::leader::LeaderElectionConfig;
use controller_manager::manager::{
    InitContext, InitOutcome, Initializer, Initializers, Manager, ManagerConfig, ManagerError,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube_testenv::TestEnv;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);
const LEASE_NS: &str = "kube-system";
const LEASE: &str = "failures";

fn config(leader: bool) -> ManagerConfig {
    let mut config = ManagerConfig::new("test-manager");
    config.graceful_shutdown_timeout = Duration::from_secs(10);
    config.cache_sync_timeout = Duration::from_millis(500);
    if leader {
        let mut le = LeaderElectionConfig::new(LEASE_NS, LEASE, "replica-a");
        // Long enough that "released" and "expired" cannot be confused within the test.
        le.lease_duration = Duration::from_secs(60);
        le.renew_deadline = Duration::from_secs(40);
        le.retry_period = Duration::from_millis(200);
        config.leader_election = Some(le);
    }
    config
}

async fn holder(env: &TestEnv) -> Option<String> {
    Api::<Lease>::namespaced(env.client(), LEASE_NS)
        .get_opt(LEASE)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

/// An initializer that watches Nodes and runs until shutdown: there is something to stop.
fn healthy() -> Initializer<()> {
    Initializer::new("healthy", |ctx: InitContext<()>| async move {
        let _nodes = ctx.factory.informer::<Node>();
        let stop = ctx.shutdown.clone();
        Ok(InitOutcome::Started(Box::pin(async move {
            stop.cancelled().await
        })))
    })
}

/// Runs `manager` to its end (bounded: today's bug is that it never ends) and checks the Lease
/// was given up when leader election was on.
async fn run_to_error(env: &TestEnv, manager: Manager<()>, leader: bool) -> ManagerError {
    let ended = tokio::time::timeout(WAIT, manager.run(CancellationToken::new()))
        .await
        .expect("Manager::run kept going (and renewing the Lease) after start-up failed");
    let err = ended.expect_err("start-up failed, run must say so");
    if leader {
        assert_eq!(holder(env).await, None, "the Lease was not released: {err}");
    }
    err
}

#[tokio::test]
async fn an_initializer_error_ends_run_and_gives_up_the_lease() {
    let env = TestEnv::start().await.unwrap();
    for leader in [true, false] {
        let broken = Initializer::new("broken", |_ctx: InitContext<()>| async {
            Err("--cluster-cidr is empty; set it to the pod network CIDR".into())
        });
        let manager = Manager::new(config(leader), env.client(), ())
            .with_initializers(Initializers::new().with(healthy()).with(broken));
        let err = run_to_error(&env, manager, leader).await;
        assert!(
            matches!(&err, ManagerError::Init { name, .. } if name == "broken"),
            "leader election {leader}: {err:?}"
        );
        assert!(err.to_string().contains("--cluster-cidr is empty"), "{err}");
    }
}

#[tokio::test]
async fn a_start_hook_error_ends_run_and_gives_up_the_lease() {
    let env = TestEnv::start().await.unwrap();
    // A warm standby runs the hook on winning the Lease too, after its caches synced.
    for (leader, warm) in [(true, false), (true, true), (false, false)] {
        let mut config = config(leader);
        config.warm_standby = warm;
        let manager = Manager::new(config, env.client(), ())
            .with_initializers(Initializers::new().with(healthy()))
            .with_start_hook(|_, _, _| async { Err("cloud unreachable".into()) });
        let err = run_to_error(&env, manager, leader).await;
        assert!(
            matches!(&err, ManagerError::StartHook(e) if e.to_string() == "cloud unreachable"),
            "leader election {leader}, warm {warm}: {err:?}"
        );
    }
}

#[tokio::test]
async fn a_cache_sync_timeout_ends_run_and_gives_up_the_lease() {
    let env = TestEnv::start().await.unwrap();
    for leader in [true, false] {
        // kube-testenv serves no Deployments: that cache never fills.
        let unsyncable = Initializer::new("unsyncable", |ctx: InitContext<()>| async move {
            let _deployments = ctx.factory.informer::<Deployment>();
            let stop = ctx.shutdown.clone();
            Ok(InitOutcome::Started(Box::pin(async move {
                stop.cancelled().await
            })))
        });
        let manager = Manager::new(config(leader), env.client(), ())
            .with_initializers(Initializers::new().with(healthy()).with(unsyncable));
        let err = run_to_error(&env, manager, leader).await;
        assert!(
            matches!(&err, ManagerError::CacheSync(_)),
            "leader election {leader}: {err:?}"
        );
    }
}

/// How the doomed controller's task ends.
#[derive(Clone, Copy, Debug)]
enum Death {
    Returns,
    Panics,
}

#[tokio::test]
async fn a_controller_that_returns_or_panics_stops_the_manager_and_fails_its_check_meanwhile() {
    let env = TestEnv::start().await.unwrap();
    for death in [Death::Returns, Death::Panics] {
        let (die_tx, die_rx) = oneshot::channel::<()>();
        let die_rx = Arc::new(Mutex::new(Some(die_rx)));
        let doomed = Initializer::new("doomed", move |_ctx: InitContext<()>| {
            let die_rx = die_rx.lock().take();
            async move {
                Ok(InitOutcome::Started(Box::pin(async move {
                    if let Some(rx) = die_rx {
                        let _ = rx.await;
                    }
                    if let Death::Panics = death {
                        panic!("provider bug");
                    }
                })))
            }
        });
        // Drains only when told to, so the window between the death and the return is visible.
        let (drain_tx, drain_rx) = oneshot::channel::<()>();
        let drain_rx = Arc::new(Mutex::new(Some(drain_rx)));
        let draining = Initializer::new("draining", move |ctx: InitContext<()>| {
            let drain_rx = drain_rx.lock().take();
            async move {
                let stop = ctx.shutdown.clone();
                Ok(InitOutcome::Started(Box::pin(async move {
                    stop.cancelled().await;
                    if let Some(rx) = drain_rx {
                        let _ = rx.await;
                    }
                })))
            }
        });
        let manager = Manager::new(config(true), env.client(), ()).with_initializers(
            Initializers::new()
                .with(healthy())
                .with(doomed)
                .with(draining),
        );
        let health = manager.health_checks();
        let registry = manager.registry();
        let run = tokio::spawn(manager.run(CancellationToken::new()));

        let running = |name: &str| {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry.lock()).unwrap();
            let series =
                format!("running_managed_controllers{{name=\"{name}\",manager=\"test-manager\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(series.as_str()).map(str::to_owned))
        };
        let deadline = tokio::time::Instant::now() + WAIT;
        while running("doomed").as_deref() != Some("1") {
            assert!(tokio::time::Instant::now() < deadline, "doomed never ran");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(health.run_one("doomed").await, Some(Ok(())));

        die_tx.send(()).unwrap();
        let failed = loop {
            if let Some(Err(reason)) = health.run_one("doomed").await {
                break reason;
            }
            assert!(tokio::time::Instant::now() < deadline, "check never failed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let expected = match death {
            Death::Returns => "its task returned",
            Death::Panics => "panicked: provider bug",
        };
        assert!(failed.contains(expected), "{death:?}: {failed}");
        assert_eq!(running("doomed").as_deref(), Some("0"), "{death:?}");
        assert!(
            !run.is_finished(),
            "run returned without draining the others"
        );

        drain_tx.send(()).unwrap();
        let err = tokio::time::timeout(WAIT, run)
            .await
            .expect("the manager kept running with a dead controller")
            .unwrap()
            .unwrap_err();
        match &err {
            ManagerError::ControllerStopped { name, reason } => {
                assert_eq!(name, "doomed");
                assert!(reason.contains(expected), "{death:?}: {reason}");
            }
            other => panic!("{death:?}: expected ControllerStopped, got {other:?}"),
        }
        assert_eq!(holder(&env).await, None, "{death:?}: Lease not released");
    }
}

/// The process's client at 2 QPS (burst 1), its whole budget spent by a controller listing in
/// eight loops: each renewal through it would wait about 4 s, beyond the 1.5 s renew deadline.
/// Through the manager's own Lease client the leader keeps renewing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_spending_the_process_qps_does_not_cost_the_lease() {
    use controller_manager::client::{ClientBuilder, client_from_config};
    use k8s_openapi::api::core::v1::ConfigMap;

    let env = TestEnv::start().await.unwrap();
    let root = client_from_config(env.config(), 2.0, 1, "test-manager", None).unwrap();
    let clients = ClientBuilder::simple(env.config(), "test-manager", 2.0, 1, None);
    let mut config = config(false);
    config.leader_election = Some(controller_manager::testing::fast_leader_election(
        LEASE,
        "replica-a",
    ));
    let lists = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = lists.clone();
    let hog = Initializer::new("hog", move |ctx: InitContext<()>| {
        let lists = counted.clone();
        async move {
            let stop = ctx.shutdown.clone();
            let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "default");
            Ok(InitOutcome::Started(Box::pin(async move {
                let loops = (0..8).map(|_| {
                    let (api, stop, lists) = (api.clone(), stop.clone(), lists.clone());
                    async move {
                        let lp = kube::api::ListParams::default();
                        while !stop.is_cancelled() {
                            tokio::select! {
                                _ = api.list(&lp) => {}
                                () = stop.cancelled() => {}
                            }
                            lists.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                });
                futures::future::join_all(loops).await;
            })))
        }
    });
    let manager = Manager::new(config, root, ())
        .with_client_builder(clients)
        .with_initializers(Initializers::new().with(hog));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));
    for _ in 0..100 {
        if holder(&env).await.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(holder(&env).await.as_deref(), Some("replica-a"));
    // Three renew deadlines with the process's QPS spent.
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    assert!(!run.is_finished(), "the manager stopped: {:?}", run.await);
    let spent = lists.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        (6..=14).contains(&spent),
        "the hog made {spent} LISTs: its 2 QPS were not spent"
    );
    assert_eq!(holder(&env).await.as_deref(), Some("replica-a"));
    stop.cancel();
    run.await.unwrap().unwrap();
}
