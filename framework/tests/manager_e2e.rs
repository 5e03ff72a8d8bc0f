//! The manager end to end over HTTP against kube-testenv: controllers picked by `--controllers`
//! share one LIST and one WATCH per type, "not started" is skipped, an initializer error aborts
//! start-up before any worker runs, and shutdown drains in-flight reconciles.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use controller_manager::controller::{Action, Controller, Request};
use controller_manager::informer::Event;
use controller_manager::manager::{
    InitContext, InitOutcome, Initializer, Initializers, Manager, ManagerConfig, ManagerError,
};
use controller_manager::workqueue::ItemExponential;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, PostParams, ResourceExt};
use kube_testenv::TestEnv;
use parking_lot::Mutex;
use serde_json::json;
use support::{count, shut_down};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// Keys each controller reconciled, by controller name.
#[derive(Default)]
struct Seen(Mutex<BTreeMap<String, BTreeSet<String>>>);

impl Seen {
    fn record(&self, controller: &str, key: &str) {
        self.0
            .lock()
            .entry(controller.to_string())
            .or_default()
            .insert(key.to_string());
    }
    fn keys(&self, controller: &str) -> BTreeSet<String> {
        self.0.lock().get(controller).cloned().unwrap_or_default()
    }
}

/// A controller over `K` that records every key it reconciles.
fn watching<K>(name: &str) -> Initializer<Arc<Seen>>
where
    K: controller_manager::informer::InformerResource,
{
    let controller = name.to_string();
    Initializer::new(name, move |ctx: InitContext<Arc<Seen>>| {
        let controller = controller.clone();
        async move {
            let informer = ctx.factory.informer::<K>();
            let queue = ctx.queue::<String>(&controller, ItemExponential::default());
            let q = queue.clone();
            informer
                .add_handler(move |e: &Event<K>| q.add(e.object().name_any()))
                .detach();
            let seen = ctx.extra.clone();
            let name = controller.clone();
            let svc = tower::service_fn(move |req: Request<String>| {
                seen.record(&name, &req.key);
                async move { Ok::<_, Infallible>(Action::Done) }
            });
            let workers = Controller::new(controller, queue, svc).workers(2);
            let stop = ctx.shutdown.clone();
            Ok(InitOutcome::Started(Box::pin(async move {
                workers.run(stop).await
            })))
        }
    })
}

fn config(controllers: &[&str]) -> ManagerConfig {
    let mut config = ManagerConfig::new("test-manager");
    config.controllers = controllers.iter().map(|s| s.to_string()).collect();
    config.graceful_shutdown_timeout = Duration::from_secs(5);
    config
}

async fn create_node(env: &TestEnv, name: &str) {
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Node>::all(env.client())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
}

async fn create_service(env: &TestEnv, name: &str) {
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"ports": [{"port": 80}]}
    }))
    .unwrap();
    Api::<Service>::namespaced(env.client(), "default")
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
}

async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn five_controllers() -> Initializers<Arc<Seen>> {
    Initializers::new()
        .with(watching::<Node>("node-a").alias("a"))
        .with(watching::<Node>("node-b"))
        .with(watching::<Node>("node-c"))
        .with(watching::<Service>("svc-a"))
        .with(watching::<Service>("svc-b").disabled_by_default())
}

#[tokio::test]
async fn selected_controllers_share_one_list_and_watch_per_type() {
    let env = TestEnv::start().await.unwrap();
    create_node(&env, "n1").await;
    create_service(&env, "s1").await;
    env.clear_requests();

    let seen = Arc::new(Seen::default());
    let manager = Manager::new(
        config(&["*", "svc-b", "-node-c"]),
        env.client(),
        seen.clone(),
    )
    .with_initializers(five_controllers());
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));

    create_node(&env, "n2").await;
    create_service(&env, "s2").await;
    let nodes: BTreeSet<String> = ["n1", "n2"].map(String::from).into();
    let services: BTreeSet<String> = ["kubernetes", "s1", "s2"].map(String::from).into();
    eventually("every selected controller saw every object", || {
        seen.keys("node-a") == nodes
            && seen.keys("node-b") == nodes
            && seen.keys("svc-a") == services
            && seen.keys("svc-b") == services
    })
    .await;
    assert!(seen.keys("node-c").is_empty(), "-node-c disables it");

    // One shared streaming list (a WATCH, no LIST) per kind for every controller.
    assert_eq!(count(&env, "list", "nodes"), 0);
    assert_eq!(count(&env, "watch", "nodes"), 1);
    assert_eq!(count(&env, "list", "services"), 0);
    assert_eq!(count(&env, "watch", "services"), 1);

    shut_down(&stop, run, WAIT).await;
}

#[tokio::test]
async fn unknown_controller_names_fail_before_any_request() {
    let env = TestEnv::start().await.unwrap();
    env.clear_requests();
    let manager = Manager::new(
        config(&["a", "nope", "-also-nope"]),
        env.client(),
        Arc::new(Seen::default()),
    )
    .with_initializers(five_controllers());
    let err = manager.run(CancellationToken::new()).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ManagerError::Selection(_)), "{err:?}");
    assert!(
        text.contains(r#""nope" is not in the list of known controllers"#),
        "{text}"
    );
    assert!(
        text.contains(r#""also-nope" is not in the list of known controllers"#),
        "{text}"
    );
    assert!(env.requests().is_empty(), "nothing may start on a bad flag");
}

#[tokio::test]
async fn duplicate_names_in_the_map_are_rejected() {
    let env = TestEnv::start().await.unwrap();
    let manager = Manager::new(config(&["*"]), env.client(), Arc::new(Seen::default()))
        .with_initializers(five_controllers().with(watching::<Node>("a")));
    let err = manager.run(CancellationToken::new()).await.unwrap_err();
    assert!(
        err.to_string().contains(r#""a" is registered twice"#),
        "{err}"
    );
}

#[tokio::test]
async fn not_started_is_skipped_and_an_init_error_aborts_start_up() {
    let env = TestEnv::start().await.unwrap();
    let seen = Arc::new(Seen::default());
    let skipped = Initializer::new("skipped", |_ctx: InitContext<Arc<Seen>>| async {
        Ok(InitOutcome::NotStarted("no facet".into()))
    });
    let manager = Manager::new(config(&["*"]), env.client(), seen.clone()).with_initializers(
        Initializers::new()
            .with(skipped)
            .with(watching::<Node>("node-a")),
    );
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));
    create_node(&env, "n1").await;
    eventually("node-a runs although 'skipped' did not start", || {
        seen.keys("node-a").contains("n1")
    })
    .await;
    shut_down(&stop, run, WAIT).await;

    let failing = Initializer::new("broken", |_ctx: InitContext<Arc<Seen>>| async {
        Err("--cluster-cidr is empty; set it to the pod network CIDR".into())
    });
    let seen = Arc::new(Seen::default());
    let manager = Manager::new(config(&["*"]), env.client(), seen.clone()).with_initializers(
        Initializers::new()
            .with(watching::<Node>("node-a"))
            .with(failing),
    );
    let err = manager.run(CancellationToken::new()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains(r#"error starting controller "broken": --cluster-cidr is empty"#),
        "{err}"
    );
    assert!(
        seen.keys("node-a").is_empty(),
        "no worker runs when start-up aborts"
    );
}

/// A controller over Nodes whose every reconcile awaits `reconcile()`; the receiver fires when the
/// first reconcile begins.
fn node_controller<F, Fut>(
    name: &'static str,
    reconcile: F,
) -> (Initializer<()>, tokio::sync::oneshot::Receiver<()>)
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started_tx = Arc::new(Mutex::new(Some(started_tx)));
    let init = Initializer::new(name, move |ctx: InitContext<()>| {
        let started_tx = started_tx.clone();
        let reconcile = reconcile.clone();
        async move {
            let informer = ctx.factory.informer::<Node>();
            let queue = ctx.queue::<String>(name, ItemExponential::default());
            let q = queue.clone();
            informer
                .add_handler(move |e: &Event<Node>| q.add(e.object().name_any()))
                .detach();
            let svc = tower::service_fn(move |_req: Request<String>| {
                let started_tx = started_tx.clone();
                let work = reconcile();
                async move {
                    if let Some(tx) = started_tx.lock().take() {
                        let _ = tx.send(());
                    }
                    work.await;
                    Ok::<_, Infallible>(Action::Done)
                }
            });
            let stop = ctx.shutdown.clone();
            Ok(InitOutcome::Started(Box::pin(async move {
                Controller::new(name, queue, svc).run(stop).await
            })))
        }
    });
    (init, started_rx)
}

#[tokio::test]
async fn shutdown_waits_for_in_flight_reconciles() {
    let env = TestEnv::start().await.unwrap();
    create_node(&env, "slow").await;
    let finished = Arc::new(Mutex::new(false));
    let done = finished.clone();
    let (slow, started) = node_controller("slow", move || {
        let done = done.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            *done.lock() = true;
        }
    });
    let manager = Manager::new(config(&["*"]), env.client(), ())
        .with_initializers(Initializers::new().with(slow));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));
    tokio::time::timeout(WAIT, started).await.unwrap().unwrap();
    shut_down(&stop, run, WAIT).await;
    assert!(
        *finished.lock(),
        "the in-flight reconcile finished before run returned"
    );
}

#[tokio::test]
async fn reconciles_past_the_graceful_deadline_are_abandoned() {
    struct DropFlag(Arc<Mutex<bool>>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            *self.0.lock() = true;
        }
    }
    let env = TestEnv::start().await.unwrap();
    create_node(&env, "stuck").await;
    let dropped = Arc::new(Mutex::new(false));
    let flag = dropped.clone();
    let (stuck, started) = node_controller("stuck", move || {
        let guard = DropFlag(flag.clone());
        async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        }
    });
    let mut cfg = config(&["*"]);
    cfg.graceful_shutdown_timeout = Duration::from_millis(200);
    let manager =
        Manager::new(cfg, env.client(), ()).with_initializers(Initializers::new().with(stuck));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));
    tokio::time::timeout(WAIT, started).await.unwrap().unwrap();
    shut_down(&stop, run, WAIT).await;
    eventually("the stuck reconcile was dropped", || *dropped.lock()).await;
}
