//! A builder-made controller sharded over two in-process managers on one kube-testenv, with no
//! call beyond `Initializer::shardable()` and `sharded_controllers`: once the ring of two has
//! settled, every ConfigMap is reconciled by exactly one manager and both take part; after one
//! stops, the other re-verifies the keys it gained and reconciles what comes next.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use controller_manager::builder::ControllerBuilder;
use controller_manager::controller::{Action, Request};
use controller_manager::informer::ObjectKey;
use controller_manager::manager::{InitContext, Initializer, Initializers, Manager, ManagerConfig};
use controller_manager::shard::RING_LABEL;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube_testenv::TestEnv;
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Which replica reconciled each key, in order.
type Log = Arc<Mutex<Vec<(String, String)>>>;

fn mirror(replica: &'static str) -> Initializer<Log> {
    Initializer::new("mirror", move |ctx: InitContext<Log>| async move {
        let log = ctx.extra.clone();
        let reconciler = tower::service_fn(move |req: Request<ObjectKey>| {
            log.lock().push((replica.to_string(), req.key.to_string()));
            async { Ok::<_, Infallible>(Action::Done) }
        });
        Ok(ControllerBuilder::<ConfigMap>::new(&ctx)
            .workers(2)
            .start(reconciler))
    })
    .shardable()
}

fn start(
    client: &kube::Client,
    replica: &'static str,
    log: &Log,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let mut config = ManagerConfig::new("m");
    config.sharded_controllers = vec!["mirror".into()];
    let le = controller_manager::testing::fast_leader_election("m", replica);
    config.leader_election = Some(le);
    let manager = Manager::new(config, client.clone(), log.clone())
        .with_initializers(Initializers::new().with(mirror(replica)));
    let stop = CancellationToken::new();
    let token = stop.clone();
    let task = tokio::spawn(async move { manager.run(token).await.expect("manager ran") });
    (stop, task)
}

async fn members(client: &kube::Client) -> usize {
    let api: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let lp = ListParams::default().labels(&format!("{RING_LABEL}=m-mirror"));
    api.list(&lp).await.expect("leases").items.len()
}

/// Waits until the ring has `n` members and has had time to settle.
async fn ring_of(client: &kube::Client, n: usize) {
    for _ in 0..100 {
        if members(client).await == n {
            tokio::time::sleep(Duration::from_millis(1000)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the ring never had {n} members");
}

async fn create(client: &kube::Client, names: impl Iterator<Item = String>) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in names {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
}

/// Replicas that reconciled each of `keys` (after `from` log entries), once all were seen.
async fn reconcilers(
    log: &Log,
    from: usize,
    keys: &BTreeSet<String>,
) -> BTreeMap<String, BTreeSet<String>> {
    for _ in 0..100 {
        let mut by_key: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (replica, key) in log.lock().iter().skip(from) {
            by_key
                .entry(key.clone())
                .or_default()
                .insert(replica.clone());
        }
        if keys.iter().all(|k| by_key.contains_key(k)) {
            return by_key;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not every key was reconciled: {:?}", log.lock());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builder_controller_shards_in_one_call() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let log = Log::default();
    let (stop_a, task_a) = start(&client, "a", &log);
    let (stop_b, task_b) = start(&client, "b", &log);
    ring_of(&client, 2).await;

    let first: BTreeSet<String> = (0..20).map(|i| format!("default/cm-{i:02}")).collect();
    let from = log.lock().len();
    create(&client, (0..20).map(|i| format!("cm-{i:02}"))).await;
    let seen = reconcilers(&log, from, &first).await;
    let mut owners = BTreeMap::new();
    for key in &first {
        assert_eq!(seen[key].len(), 1, "{key} reconciled by {:?}", seen[key]);
        owners.insert(key.clone(), seen[key].iter().next().cloned().unwrap());
    }
    let sharing: BTreeSet<_> = owners.values().collect();
    assert_eq!(sharing.len(), 2, "one replica did everything: {owners:?}");

    // Taken before b stops: a may re-verify b's keys as soon as b's Lease is gone.
    let from = log.lock().len();
    stop_b.cancel();
    task_b.await.unwrap();
    ring_of(&client, 1).await;
    // b's keys are re-verified by a (gained), and new keys go to a.
    create(&client, (20..25).map(|i| format!("cm-{i:02}"))).await;
    let b_keys: BTreeSet<String> = owners
        .iter()
        .filter(|(_, o)| o.as_str() == "b")
        .map(|(k, _)| k.clone())
        .collect();
    let later: BTreeSet<String> = (20..25).map(|i| format!("default/cm-{i:02}")).collect();
    let expected: BTreeSet<String> = b_keys.union(&later).cloned().collect();
    let seen = reconcilers(&log, from, &expected).await;
    assert!(
        seen.values().all(|r| r.len() == 1 && r.contains("a")),
        "after b stopped: {seen:?}"
    );
    stop_a.cancel();
    task_a.await.unwrap();
    assert_eq!(members(&client).await, 0, "a member Lease was left behind");
}
