//! Failover bench (docs/benchmarks.md §7): what a standby costs after the leader dies, cold and
//! warm (`ManagerConfig::warm_standby`, `--leader-elect-warm-standby`), over `--nodes` Nodes
//! (default 10,000) in one kube-testenv. Two in-process replicas of a builder-made Node
//! controller (4 workers) with leader election on; the leader has reconciled every Node, the
//! standby has waited 5 s (a warm one has synced its cache by then); the leader is killed
//! (`kill -9`: its runtime shut down) and one fresh Node is created at once. Reported from the
//! moment the standby's identity is in the Lease: its first reconcile, the fresh Node's
//! reconcile (an event, so ahead of the re-verification of the inherited keys) and the last of
//! the inherited keys, plus the LIST (or streaming-list) requests the standby sent after the kill.
//!
//! `cargo bench -p controller-manager --bench failover -- [--nodes N]`
//!
//! The Lease is 2 s / 1.5 s / 0.2 s, so the takeover itself (kill → acquired) is bounded below by
//! the 2 s expiry and is the same in both modes.

#[path = "support/replica.rs"]
mod replica;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller_manager::builder::ControllerBuilder;
use controller_manager::controller::{Action, Request};
use controller_manager::informer::ObjectKey;
use controller_manager::manager::{InitContext, Initializer, ManagerConfig};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use kube_testenv::TestEnv;
use parking_lot::Mutex;
use serde_json::json;

/// Reconciles in order: replica, key, when.
type Log = Arc<Mutex<Vec<(String, ObjectKey, Instant)>>>;

fn controller(replica: String) -> Initializer<Log> {
    Initializer::new("bench", move |ctx: InitContext<Log>| {
        let replica = replica.clone();
        async move {
            let log = ctx.extra.clone();
            let reconciler = tower::service_fn(move |req: Request<ObjectKey>| {
                log.lock().push((replica.clone(), req.key, Instant::now()));
                async { Ok::<_, Infallible>(Action::Done) }
            });
            Ok(ControllerBuilder::<Node>::new(&ctx)
                .workers(4)
                .start(reconciler))
        }
    })
}

/// A replica with leader election on `lease` (see `support::replica`).
fn start(env: &TestEnv, lease: &str, id: &str, warm: bool, log: &Log) -> tokio::runtime::Runtime {
    let mut config = ManagerConfig::new("bench");
    config.warm_standby = warm;
    config.cache_sync_timeout = Duration::from_secs(120);
    config.leader_election = Some(replica::fast_lease(lease, id));
    replica::spawn(env, config, controller(id.to_string()), log)
}

fn node(name: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
        "spec": { "providerID": format!("fake://{name}") }
    }))
    .expect("node")
}

/// Polls until `done` holds.
async fn until(mut done: impl FnMut() -> bool) {
    while !done() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Polls the Lease until `id` holds it; returns when that was seen.
async fn acquired(api: &Api<Lease>, lease: &str, id: &str) -> Instant {
    loop {
        let holder = api
            .get_opt(lease)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity);
        if holder.as_deref() == Some(id) {
            return Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let nodes: usize = std::env::args()
        .skip_while(|a| a != "--nodes")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let env = TestEnv::start().await.expect("testenv");
    let node_api: Api<Node> = Api::all(env.client());
    let lease_api: Api<Lease> = Api::namespaced(env.client(), "kube-system");
    replica::create_all(&node_api, (0..nodes).map(|i| node(&format!("node-{i:05}")))).await;
    println!("failover bench: {nodes} Nodes, lease 2 s");
    println!(
        "| standby | kill → acquired | acquired → first reconcile | acquired → the fresh Node reconciled | acquired → every inherited Node reconciled | LISTs (or streaming lists) after the kill |"
    );
    println!("|---|---|---|---|---|---|");
    for (mode, warm) in [("cold", false), ("warm", true)] {
        let log = Log::default();
        let lease = format!("failover-{mode}");
        let leader = start(&env, &lease, "a", warm, &log);
        until(|| log.lock().len() >= nodes).await;
        let standby = start(&env, &lease, "b", warm, &log);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let seen = log.lock().len();
        // From the kill on, every Node LIST is the standby's: a cold one lists within
        // milliseconds of winning, before this bench sees the Lease change.
        env.clear_requests();
        let killed = Instant::now();
        leader.shutdown_background();
        let fresh = format!("fresh-{mode}");
        node_api
            .create(&PostParams::default(), &node(&fresh))
            .await
            .expect("fresh node");
        let won = acquired(&lease_api, &lease, "b").await;
        until(|| {
            log.lock()
                .iter()
                .skip(seen)
                .filter(|(r, _, _)| r == "b")
                .count()
                > nodes
        })
        .await;
        let lists = env
            .requests()
            .iter()
            .filter(|r| r.resource == "nodes")
            .filter(|r| r.verb == "list" || r.query.contains("sendInitialEvents=true"))
            .count();
        let after: Vec<(String, ObjectKey, Instant)> = log
            .lock()
            .iter()
            .skip(seen)
            .filter(|(r, _, _)| r == "b")
            .cloned()
            .collect();
        let first = after.first().map(|(_, _, t)| *t).unwrap_or(won);
        let fresh_at = after
            .iter()
            .find(|(_, k, _)| k.name == fresh)
            .map(|(_, _, t)| *t)
            .unwrap_or(won);
        let last = after.last().map(|(_, _, t)| *t).unwrap_or(won);
        println!(
            "| {mode} | {} | {} | {} | {} | {lists} |",
            ms(won - killed),
            ms(first.saturating_duration_since(won)),
            ms(fresh_at.saturating_duration_since(won)),
            ms(last.saturating_duration_since(won)),
        );
        standby.shutdown_background();
        // Let the dead replicas' Lease expire; the next mode uses its own Lease anyway.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
