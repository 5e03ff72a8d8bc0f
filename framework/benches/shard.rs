//! Sharding bench (docs/benchmarks.md §7): 1, 2 and 3 in-process replicas of a builder-made
//! ConfigMap controller, sharded over a ring, against one kube-testenv holding `--objects`
//! ConfigMaps (default 30,000). For each replica count it reports the reconciles per replica
//! until every key was reconciled once, the time that took, the Lease requests the ring costs per
//! replica per second, and, with more than one replica, the time from killing one replica
//! (`kill -9`: its runtime shut down) until the others reconciled every key it owned. It runs in
//! hash mode and in label mode (`--shard-assignment=label`), and reports per replica the
//! ConfigMaps its cache holds, the label patches the round cost and the process RSS after it.
//!
//! `cargo bench -p controller-manager --bench shard -- [--objects N] [--mode hash|label|both]`
//!
//! CPU and RSS per replica are not separable in one process; this bench measures work, cached
//! objects and API cost (the RSS column is the whole process, all replicas and the API server). The ring uses a 2 s lease, 1.5 s renew deadline and 0.2 s retry period, so the kill
//! handover is bounded below by the 2 s lease expiry.

#[path = "support/replica.rs"]
mod replica;

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller_manager::builder::ControllerBuilder;
use controller_manager::controller::{Action, Request};
use controller_manager::informer::{ObjectKey, SharedInformerFactory};
use controller_manager::manager::{InitContext, Initializer, ManagerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube_testenv::TestEnv;
use parking_lot::Mutex;
use serde_json::json;

/// Keys reconciled, by replica.
type Log = Arc<Mutex<BTreeMap<String, Vec<ObjectKey>>>>;
/// Each replica's informer factory, for its cache sizes.
type Factories = Arc<Mutex<BTreeMap<String, SharedInformerFactory>>>;
type Extra = (Log, Factories);

fn controller(replica: String) -> Initializer<Extra> {
    Initializer::new("bench", move |ctx: InitContext<Extra>| {
        let replica = replica.clone();
        async move {
            let log = ctx.extra.0.clone();
            ctx.extra
                .1
                .lock()
                .insert(replica.clone(), ctx.factory.clone());
            let reconciler = tower::service_fn(move |req: Request<ObjectKey>| {
                log.lock().entry(replica.clone()).or_default().push(req.key);
                async { Ok::<_, Infallible>(Action::Done) }
            });
            Ok(ControllerBuilder::<ConfigMap>::new(&ctx)
                .workers(4)
                .start(reconciler))
        }
    })
    .shardable()
}

/// A sharded replica in `mode` (see `support::replica`).
fn start(env: &TestEnv, id: &str, mode: &str, extra: &Extra) -> tokio::runtime::Runtime {
    let mut config = ManagerConfig::new("bench");
    config.sharded_controllers = vec!["bench".into()];
    config.shard_assignment = mode.to_string();
    config.leader_election = Some(replica::fast_lease("bench", id));
    replica::spawn(env, config, controller(id.to_string()), extra)
}

/// Waits until every one of `keys` was reconciled by some replica.
async fn all_reconciled(log: &Log, keys: &BTreeSet<ObjectKey>) {
    loop {
        let done = {
            let log = log.lock();
            let seen: BTreeSet<&ObjectKey> = log.values().flatten().collect();
            keys.iter().all(|k| seen.contains(k))
        };
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::main]
async fn main() {
    let objects: usize = std::env::args()
        .skip_while(|a| a != "--objects")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(30_000);
    let modes: Vec<&str> = match std::env::args()
        .skip_while(|a| a != "--mode")
        .nth(1)
        .as_deref()
    {
        Some("hash") => vec!["hash"],
        Some("label") => vec!["label"],
        _ => vec!["hash", "label"],
    };
    let env = TestEnv::start().await.expect("testenv");
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let names: Vec<String> = (0..objects).map(|i| format!("cm-{i:05}")).collect();
    let configmaps = names.iter().map(|name| {
        serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": name}, "data": {"k": "v"}}))
            .expect("configmap")
    });
    replica::create_all(&api, configmaps).await;
    let keys: BTreeSet<ObjectKey> = names
        .iter()
        .map(|n| ObjectKey::namespaced("default", n))
        .collect();
    println!("shard bench: {objects} ConfigMaps");
    println!(
        "| mode | replicas | reconciles per replica | cached per replica | label patches | all reconciled after | Lease requests / replica / s | kill → its keys reconciled | process RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for mode in modes {
        for replicas in 1..=3usize {
            round(&env, &keys, mode, replicas).await;
        }
    }
}

/// One row: `replicas` fresh members (new identities, so label mode reclaims the labels of the
/// round before) in `mode`.
async fn round(env: &TestEnv, keys: &BTreeSet<ObjectKey>, mode: &str, replicas: usize) {
    {
        let extra: Extra = Default::default();
        let log = extra.0.clone();
        env.clear_requests();
        let started = Instant::now();
        let ids: Vec<String> = (0..replicas)
            .map(|i| format!("{mode}-{replicas}-r{i}"))
            .collect();
        let mut runtimes: Vec<_> = ids.iter().map(|id| start(env, id, mode, &extra)).collect();
        all_reconciled(&log, keys).await;
        let took = started.elapsed();
        // Label mode: the caches hold their share once every label is written.
        if mode == "label" {
            while cached(&extra, &ids).iter().sum::<usize>() < keys.len() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let patches = env
            .requests()
            .iter()
            .filter(|r| r.verb == "patch" && r.resource == "configmaps")
            .count();
        let cached = cached(&extra, &ids);
        // Steady state: 5 s with nothing to do, to count what the ring alone costs.
        env.clear_requests();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let leases = env
            .requests()
            .iter()
            .filter(|r| r.resource == "leases")
            .count();
        let per_replica: Vec<usize> = ids
            .iter()
            .map(|id| log.lock().get(id).map_or(0, Vec::len))
            .collect();
        let handover = if replicas > 1 {
            let victim = ids[replicas - 1].clone();
            let owned: BTreeSet<ObjectKey> = log
                .lock()
                .get(&victim)
                .map(|k| k.iter().cloned().collect())
                .unwrap_or_default();
            let survivors: Vec<String> = ids[..replicas - 1].to_vec();
            let killed = Instant::now();
            if let Some(rt) = runtimes.pop() {
                rt.shutdown_background();
            }
            // What each survivor reconciled from now on.
            let before: BTreeMap<String, usize> = log
                .lock()
                .iter()
                .map(|(r, k)| (r.clone(), k.len()))
                .collect();
            loop {
                let done = {
                    let log = log.lock();
                    let seen: BTreeSet<&ObjectKey> = survivors
                        .iter()
                        .filter_map(|r| log.get(r).map(|k| (r, k)))
                        .flat_map(|(r, k)| k.iter().skip(before.get(r).copied().unwrap_or(0)))
                        .collect();
                    owned.iter().all(|k| seen.contains(k))
                };
                if done {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            format!("{:.2} s", killed.elapsed().as_secs_f64())
        } else {
            "–".to_string()
        };
        println!(
            "| {mode} | {replicas} | {per_replica:?} | {cached:?} | {patches} | {:.2} s | {:.1} |  {handover} | {} |",
            took.as_secs_f64(),
            leases as f64 / 5.0 / replicas as f64,
            rss(),
        );
        for rt in runtimes {
            rt.shutdown_background();
        }
        // Let the killed members' Leases expire before the next round.
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
}

/// ConfigMaps in each replica's caches (every ConfigMap informer it has).
fn cached(extra: &Extra, ids: &[String]) -> Vec<usize> {
    let factories = extra.1.lock();
    ids.iter()
        .map(|id| {
            factories.get(id).map_or(0, |f| {
                f.informers_status()
                    .iter()
                    .filter(|s| s.kind == "ConfigMap")
                    .map(|s| s.objects)
                    .sum()
            })
        })
        .collect()
}

/// The process's resident set, from /proc (Linux), else "?".
fn rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(format!("{} MiB", kb / 1024))
        })
        .unwrap_or_else(|| "?".to_string())
}
