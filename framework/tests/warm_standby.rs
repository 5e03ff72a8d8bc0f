//! A warm standby end to end: two managers with leader election on one kube-testenv, each with
//! its own user agent so the request log tells them apart. The standby syncs its Node cache
//! before it leads, says so on `/readyz`, makes no write and no (fake) cloud call, and after the
//! leader stops it reconciles from that cache without a new LIST.

mod support;

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use controller_manager::controller::{Action, Controller, Request};
use controller_manager::informer::Event;
use controller_manager::leader::LeaderElectionConfig;
use controller_manager::manager::{
    InitContext, InitOutcome, Initializer, Initializers, Manager, ManagerConfig,
};
use controller_manager::workqueue::ItemExponential;
use http::HeaderValue;
use http::header::USER_AGENT;
use k8s_openapi::api::core::v1::Node;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use kube_testenv::TestEnv;
use support::{shut_down, until};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// What a replica's controller reports: each key it reconciles (its "cloud calls").
type Reconciled = mpsc::UnboundedSender<String>;

fn node_controller() -> Initializer<Reconciled> {
    Initializer::new("node-watcher", |ctx: InitContext<Reconciled>| async move {
        let informer = ctx.factory.informer::<Node>();
        let queue = ctx.queue::<String>("node-watcher", ItemExponential::default());
        let q = queue.clone();
        informer
            .add_handler(move |e: &Event<Node>| q.add(e.object().name_any()))
            .detach();
        let extra = ctx.extra.clone();
        let svc = tower::service_fn(move |req: Request<String>| {
            let _ = extra.send(req.key.clone());
            async { Ok::<_, Infallible>(Action::Done) }
        });
        let stop = ctx.shutdown.clone();
        Ok(InitOutcome::Started(Box::pin(async move {
            Controller::new("node-watcher", queue, svc).run(stop).await
        })))
    })
}

fn replica(
    env: &TestEnv,
    identity: &str,
    admin: Option<SocketAddr>,
) -> (
    Arc<AtomicUsize>,
    mpsc::UnboundedReceiver<String>,
    Manager<Reconciled>,
) {
    let le = LeaderElectionConfig::new("kube-system", "warm-standby", identity).with_durations(
        Duration::from_millis(1000),
        Duration::from_millis(600),
        Duration::from_millis(100),
    );
    let mut config = ManagerConfig::new("warm-test");
    config.leader_election = Some(le);
    config.warm_standby = true;
    config.admin_addr = admin;
    config.admin_tls = None;
    let client = {
        let mut cfg = env.config();
        cfg.headers
            .push((USER_AGENT, HeaderValue::from_str(identity).unwrap()));
        kube::Client::try_from(cfg).unwrap()
    };
    let (tx, rx) = mpsc::unbounded_channel();
    // The start hook stands for the cloud's Initialize: counted to show it runs on the leader only.
    let hook_runs = Arc::new(AtomicUsize::new(0));
    let runs = hook_runs.clone();
    let manager = Manager::new(config, client, tx)
        .with_initializers(Initializers::new().with(node_controller()))
        .with_start_hook(move |_, _, _| {
            runs.fetch_add(1, Ordering::SeqCst);
            async { Ok(()) }
        });
    (hook_runs, rx, manager)
}

/// Requests `agent` sent, by verb.
fn verbs_of(env: &TestEnv, agent: &str) -> Vec<(String, String)> {
    env.requests()
        .into_iter()
        .filter(|r| r.user_agent.as_deref() == Some(agent))
        .map(|r| (r.verb, r.resource))
        .collect()
}

async fn node(env: &TestEnv, name: &str) {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    Api::<Node>::all(env.client())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
}

async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn a_warm_standby_syncs_without_acting_and_takes_over_without_a_new_list() {
    let env = TestEnv::start().await.unwrap();
    for name in ["n1", "n2"] {
        node(&env, name).await;
    }
    let (_, mut a_rx, a) = replica(&env, "replica-a", None);
    let a_stop = CancellationToken::new();
    let a_run = tokio::spawn(a.run(a_stop.clone()));
    next(&mut a_rx).await;
    next(&mut a_rx).await;

    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let watches = env.open_watches();
    let (b_hooks, mut b_rx, b) = replica(&env, "replica-b", Some(addr));
    let b_stop = CancellationToken::new();
    let b_run = tokio::spawn(b.run(b_stop.clone()));
    let (status, body) = until(addr, "/readyz?verbose", |status, body| {
        status == 200 && body.contains("[+]warm-standby ok")
    })
    .await;
    assert_eq!(status, 200, "a standby is ready, as upstream: {body}");
    assert!(body.contains("[+]informer-sync ok"), "{body}");
    assert_eq!(
        env.open_watches(),
        watches + 1,
        "a standby holds one watch per watched kind"
    );

    // An event while standing by fills the standby's cache and queue, and only the leader acts.
    node(&env, "n3").await;
    assert_eq!(next(&mut a_rx).await, "n3");
    let before: Vec<_> = verbs_of(&env, "replica-b");
    let lists = |v: &[(String, String)]| {
        v.iter()
            .filter(|(verb, res)| verb == "list" && res == "nodes")
            .count()
    };
    assert_eq!(
        lists(&before),
        0,
        "a streaming list fills the cache: {before:?}"
    );
    assert!(
        before.iter().any(|(v, r)| v == "watch" && r == "nodes"),
        "{before:?}"
    );
    let writes: Vec<_> = before
        .iter()
        .filter(|(v, _)| !matches!(v.as_str(), "get" | "list" | "watch"))
        .collect();
    assert!(writes.is_empty(), "a standby writes nothing: {writes:?}");
    assert_eq!(b_hooks.load(Ordering::SeqCst), 0);
    assert!(b_rx.try_recv().is_err(), "a standby reconciles nothing");

    shut_down(&a_stop, a_run, WAIT).await;
    let mut seen = vec![next(&mut b_rx).await];
    while seen.len() < 3 {
        seen.push(next(&mut b_rx).await);
    }
    seen.sort();
    assert_eq!(seen, ["n1", "n2", "n3"], "every cached key is re-verified");
    assert_eq!(b_hooks.load(Ordering::SeqCst), 1);
    let after = verbs_of(&env, "replica-b");
    assert_eq!(lists(&after), 0, "no LIST on takeover either: {after:?}");
    let (_, body) = until(addr, "/readyz?verbose", |_, body| {
        !body.contains("warm-standby")
    })
    .await;
    assert!(body.contains("readyz check passed"), "{body}");
    shut_down(&b_stop, b_run, WAIT).await;
}
