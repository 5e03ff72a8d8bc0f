//! The service controller sharded over three replicas (`--sharded-controllers=service`) against
//! one kube-testenv and one cloud: once the ring of three has settled, every load balancer is
//! ensured by exactly one replica and all three take part; a replica that stops leaves its
//! Services to the other two, which re-verify them and provision what comes next, and its Lease
//! is deleted; a killed one (`kill -9`: its runtime shut down) is replaced once its Lease expires
//! and takes a share again when it comes back. The "never two at once" proof is the paused-clock suite of
//! `framework/src/shard/handover_tests.rs`; this checks the wiring end to end.
//!
//! In label mode (`--shard-assignment=label`) each replica caches only the Services labelled to
//! it: every load balancer is still ensured by exactly one replica, a joining replica takes its
//! share by relabel, and no load balancer is ever deleted because its Service moved.
//!
//! `--sharded-controllers` naming a controller that cannot be sharded, or one not selected, and a
//! `--shard-assignment` that is neither mode, are refused before anything starts, with the reason.

mod reliability_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use controller_manager::manager::{Manager, ManagerConfig};
use controller_manager::shard::{RING_LABEL, VIEW_ANNOTATION, label_key};
use fake_cloud::{CloudCall, FakeCloud, Method};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams};
use kube_testenv::TestEnv;
use reliability_support::*;

use cloud_controllers::{CloudContext, cloud_initializers};

const RING: &str = "ccm-service-lb-controller";

fn replica_config(identity: &str) -> ManagerConfig {
    let mut config = manager_config("ccm");
    config.controllers = vec!["service".into()];
    config.sharded_controllers = vec!["service".into()];
    let le = controller_manager::testing::fast_leader_election("ccm", identity);
    config.leader_election = Some(le);
    config
}

/// The ring's Leases: identity-hash name → published view.
async fn ring_leases(client: &kube::Client) -> BTreeMap<String, Option<String>> {
    let api: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let lp = ListParams::default().labels(&format!("{RING_LABEL}={RING}"));
    let leases = api.list(&lp).await.expect("list leases");
    leases
        .items
        .into_iter()
        .map(|l| {
            let view = l
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(VIEW_ANNOTATION).cloned());
            (l.metadata.name.unwrap_or_default(), view)
        })
        .collect()
}

/// Waits until the ring has `n` Leases that all publish one view.
async fn ring_of(client: &kube::Client, n: usize) {
    let mut last = BTreeMap::new();
    for _ in 0..150 {
        last = ring_leases(client).await;
        let views: BTreeSet<_> = last.values().collect();
        if last.len() == n && views.len() == 1 && views.iter().all(|v| v.is_some()) {
            // One more retry period: every member settles on its next step.
            tokio::time::sleep(Duration::from_millis(400)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the ring never settled on {n} members: {last:?}");
}

async fn provisioned(client: &kube::Client, cloud: &FakeCloud, live: &BTreeSet<String>) {
    let mut last = None;
    for _ in 0..200 {
        if let Some(s) = Snapshot::take(client, cloud).await {
            let done = live
                .iter()
                .all(|name| s.services.get(name).is_some_and(|(ingress, _, _)| *ingress));
            if done && s.lb_count == live.len() {
                return;
            }
            last = Some(s);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not every Service was provisioned: {last:?}");
}

/// Replicas that called EnsureLoadBalancer for each Service.
fn ensurers(cloud: &FakeCloud) -> BTreeMap<String, Vec<String>> {
    let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for call in cloud.calls_to(Method::EnsureLoadBalancer) {
        by_key
            .entry(call.key)
            .or_default()
            .push(call.caller.unwrap_or_default());
    }
    by_key
}

/// kube-testenv with three Nodes, and a cloud whose EnsureLoadBalancer takes 20 ms, so two
/// replicas' calls for one Service would overlap if they raced.
async fn three_node_cluster() -> (TestEnv, kube::Client, FakeCloud) {
    init_tracing();
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let cloud = fleet_cloud(3);
    cloud.set_latency(Method::EnsureLoadBalancer, Duration::from_millis(20));
    create_nodes(&client, (0..3).map(node_name)).await;
    (env, client, cloud)
}

/// The overlap checker over the cloud's call log: no two replicas ever had calls for one Service
/// in flight at the same time (every call lies inside its replica's reconcile of that Service).
fn assert_no_overlap(cloud: &FakeCloud) {
    let mut by_key: BTreeMap<String, Vec<CloudCall>> = BTreeMap::new();
    for call in cloud.calls() {
        by_key.entry(call.key.clone()).or_default().push(call);
    }
    for (key, calls) in &by_key {
        for (i, a) in calls.iter().enumerate() {
            for b in calls[i + 1..].iter().filter(|b| b.caller != a.caller) {
                let apart = a.finished <= b.started || b.finished <= a.started;
                assert!(apart, "{key}: {a} and {b} were in flight at once");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_the_load_balancers_and_hand_over_on_stop() {
    let (_env, client, cloud) = three_node_cluster().await;
    let opts = || options(&["--concurrent-service-syncs=2"]);
    let replicas: Vec<_> = ["r0", "r1", "r2"]
        .into_iter()
        .map(|id| {
            start_manager(
                client.clone(),
                Arc::new(cloud.with_caller(id)),
                opts(),
                replica_config(id),
            )
        })
        .collect();
    ring_of(&client, 3).await;

    let first: BTreeSet<String> = (0..30).map(service_name).collect();
    create_services(&client, first.iter().cloned()).await;
    provisioned(&client, &cloud, &first).await;
    let before = ensurers(&cloud);
    let mut owner = BTreeMap::new();
    for name in &first {
        let callers: BTreeSet<_> = before[&format!("default/{name}")].iter().collect();
        assert_eq!(callers.len(), 1, "{name} was ensured by {callers:?}");
        owner.insert(
            name.clone(),
            callers.into_iter().next().cloned().unwrap_or_default(),
        );
    }
    let sharing: BTreeSet<_> = owner.values().collect();
    assert_eq!(sharing.len(), 3, "not every replica took part: {owner:?}");

    // r2 stops: its Lease goes, and the other two take its Services.
    let mut replicas = replicas;
    let (stop2, task2) = replicas.pop().expect("r2");
    stop2.cancel();
    task2.await.expect("join").expect("r2 stopped cleanly");
    ring_of(&client, 2).await;
    let second: BTreeSet<String> = (30..45).map(service_name).collect();
    create_services(&client, second.iter().cloned()).await;
    let all: BTreeSet<String> = first.union(&second).cloned().collect();
    provisioned(&client, &cloud, &all).await;

    let calls = cloud.calls_to(Method::EnsureLoadBalancer);
    let after: Vec<_> = calls
        .iter()
        .skip(before.values().map(Vec::len).sum())
        .collect();
    assert!(
        after.iter().all(|c| c.caller.as_deref() != Some("r2")),
        "r2 called the cloud after it stopped: {after:?}"
    );
    for name in &second {
        let key = format!("default/{name}");
        let callers: BTreeSet<_> = after
            .iter()
            .filter(|c| c.key == key)
            .filter_map(|c| c.caller.as_deref())
            .collect();
        assert_eq!(callers.len(), 1, "{name} was ensured by {callers:?}");
    }
    // Every Service r2 owned is re-verified by its new owner (the gained keys re-enqueued, at
    // low priority: after the new Services, so waited for).
    let skip = before.values().map(Vec::len).sum();
    let r2s: Vec<String> = owner
        .iter()
        .filter(|(_, o)| o.as_str() == "r2")
        .map(|(name, _)| format!("default/{name}"))
        .collect();
    let mut reverified = ensurers_after(&cloud, skip);
    for _ in 0..100 {
        if r2s.iter().all(|k| reverified.contains_key(k)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        reverified = ensurers_after(&cloud, skip);
    }
    for key in &r2s {
        assert!(
            reverified.contains_key(key),
            "{key}, r2's, was not re-verified after r2 left"
        );
        assert!(
            !reverified[key].contains("r2"),
            "{key}: r2 called after it stopped"
        );
    }
    assert_no_overlap(&cloud);
    for (stop, task) in replicas {
        stop.cancel();
        task.await.expect("join").expect("stopped cleanly");
    }
    assert!(
        ring_leases(&client).await.is_empty(),
        "a member Lease was left behind"
    );
}

/// A replica on its own runtime, so that shutting the runtime down is `kill -9` (no drain, no
/// Lease deleted), as `bin/tests/failover_leader.rs` does for leaders.
struct Killable(Option<tokio::runtime::Runtime>);

impl Killable {
    fn start(env: &TestEnv, cloud: &FakeCloud, id: &str) -> Killable {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("replica runtime");
        let (config, opts) = (
            replica_config(id),
            options(&["--concurrent-service-syncs=2"]),
        );
        let (kube_config, cloud) = (env.config(), Arc::new(cloud.with_caller(id)));
        runtime.spawn(async move {
            let client = kube::Client::try_from(kube_config).expect("client");
            let _ = Manager::new(config, client, CloudContext::new(cloud, opts))
                .with_initializers(cloud_initializers())
                .run(tokio_util::sync::CancellationToken::new())
                .await;
        });
        Killable(Some(runtime))
    }

    fn kill(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for Killable {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Callers of EnsureLoadBalancer per Service among the calls after the first `skip`.
fn ensurers_after(cloud: &FakeCloud, skip: usize) -> BTreeMap<String, BTreeSet<String>> {
    let mut by_key: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for call in cloud
        .calls_to(Method::EnsureLoadBalancer)
        .into_iter()
        .skip(skip)
    {
        by_key
            .entry(call.key)
            .or_default()
            .insert(call.caller.unwrap_or_default());
    }
    by_key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_is_replaced_after_its_lease_expires_and_rejoins() {
    kill_and_rejoin(30, 15, 30).await;
}

/// Creates `first` Services over three replicas, kills one and creates `second` more, restarts
/// it and creates `third` more; checks one owner per Service at each step and no overlap.
async fn kill_and_rejoin(first: usize, second: usize, third: usize) {
    let (env, client, cloud) = three_node_cluster().await;
    let mut replicas: Vec<_> = ["r0", "r1", "r2"]
        .iter()
        .map(|id| Killable::start(&env, &cloud, id))
        .collect();
    ring_of(&client, 3).await;
    let (second, third) = (
        first..first + second,
        first + second..first + second + third,
    );
    let first: BTreeSet<String> = (0..first).map(service_name).collect();
    create_services(&client, first.iter().cloned()).await;
    provisioned(&client, &cloud, &first).await;
    let owner: BTreeMap<String, BTreeSet<String>> = ensurers_after(&cloud, 0);
    assert!(owner.values().all(|c| c.len() == 1), "{owner:?}");

    // kill -9: r2's Lease stays until it expires (2 s), then r0 and r1 take its Services.
    replicas[2].kill();
    let killed_at = std::time::Instant::now();
    let skip = cloud.calls_to(Method::EnsureLoadBalancer).len();
    let second: BTreeSet<String> = second.map(service_name).collect();
    create_services(&client, second.iter().cloned()).await;
    let all: BTreeSet<String> = first.union(&second).cloned().collect();
    provisioned(&client, &cloud, &all).await;
    let took = killed_at.elapsed();
    println!(
        "service_sharded: {} Services provisioned {took:?} after a kill (lease 2 s)",
        second.len()
    );
    assert!(took < Duration::from_secs(12), "took {took:?}");
    let after = ensurers_after(&cloud, skip);
    assert!(
        after.values().all(|c| c.len() == 1 && !c.contains("r2")),
        "after the kill: {after:?}"
    );
    // r2's Services are re-verified by their new owners; at low priority, so after the new
    // Services: wait for them rather than expect them done already.
    let r2s: Vec<&String> = owner.keys().filter(|k| owner[*k].contains("r2")).collect();
    let mut taken = ensurers_after(&cloud, skip);
    for _ in 0..100 {
        if r2s.iter().all(|k| taken.contains_key(*k)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        taken = ensurers_after(&cloud, skip);
    }
    for key in r2s {
        assert!(taken.contains_key(key), "{key}, r2's, was not taken over");
        assert!(
            !taken[key].contains("r2"),
            "{key}: r2 called after it was killed"
        );
    }

    // r2 comes back (same identity): it takes back a share of new Services, one owner each.
    replicas[2] = Killable::start(&env, &cloud, "r2");
    ring_of(&client, 3).await;
    let skip = cloud.calls_to(Method::EnsureLoadBalancer).len();
    let third: BTreeSet<String> = third.map(service_name).collect();
    create_services(&client, third.iter().cloned()).await;
    let all: BTreeSet<String> = all.union(&third).cloned().collect();
    provisioned(&client, &cloud, &all).await;
    let rejoined = ensurers_after(&cloud, skip);
    for name in &third {
        let callers = &rejoined[&format!("default/{name}")];
        assert_eq!(callers.len(), 1, "{name}: {callers:?}");
    }
    assert!(
        rejoined.values().any(|c| c.contains("r2")),
        "r2 took no share after it rejoined: {rejoined:?}"
    );
    assert_no_overlap(&cloud);
}

fn manager(config: ManagerConfig) -> Manager<CloudContext> {
    let cloud = Arc::new(fleet_cloud(1));
    Manager::new(
        config,
        kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:9".parse().expect("url"),
        ))
        .expect("client"),
        CloudContext::new(cloud, options(&[])),
    )
    .with_initializers(cloud_initializers())
}

#[tokio::test]
async fn sharding_what_cannot_be_sharded_is_refused_with_the_reason() {
    let mut config = replica_config("r0");
    config.controllers = vec!["*".into(), "route".into()];
    config.sharded_controllers = vec![
        "route".into(),
        "cloud-node-lifecycle".into(),
        "nosuch".into(),
        "cloud-node".into(),
    ];
    let err = manager(config).validate().expect_err("refused").to_string();
    assert!(err.starts_with("--sharded-controllers: "), "{err}");
    assert!(
        err.contains("\"route\" cannot run sharded: it reconciles the whole route table"),
        "{err}"
    );
    assert!(
        err.contains("\"cloud-node-lifecycle\" cannot run sharded"),
        "{err}"
    );
    assert!(
        err.contains("\"nosuch\" is not a known controller"),
        "{err}"
    );
    assert!(
        !err.contains("\"cloud-node\""),
        "cloud-node is shardable: {err}"
    );

    let mut config = replica_config("r0");
    config.controllers = vec!["service".into()];
    config.sharded_controllers = vec!["cloud-node".into()];
    let err = manager(config).validate().expect_err("refused").to_string();
    assert!(
        err.contains("\"cloud-node\" is not enabled by --controllers"),
        "{err}"
    );

    let mut config = replica_config("r0");
    config.shard_assignment = "labels".into();
    let err = manager(config).validate().expect_err("refused").to_string();
    assert_eq!(
        err,
        r#"--shard-assignment: "labels" is not one of "hash", "label""#
    );
}

/// Services by the value of their assignment label (`None`: unlabelled).
async fn labels(client: &kube::Client) -> BTreeMap<String, Option<String>> {
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let key = label_key(RING);
    let list = api.list(&ListParams::default()).await.expect("services");
    list.items
        .into_iter()
        .filter(|s| s.metadata.name.as_deref() != Some("kubernetes"))
        .map(|s| {
            let value = s.metadata.labels.and_then(|l| l.get(&key).cloned());
            (s.metadata.name.unwrap_or_default(), value)
        })
        .collect()
}

/// Waits until every Service is labelled and the labels name `n` distinct members.
async fn labelled_over(client: &kube::Client, n: usize) -> BTreeMap<String, Option<String>> {
    let mut last = BTreeMap::new();
    for _ in 0..150 {
        last = labels(client).await;
        let members: BTreeSet<_> = last.values().flatten().collect();
        if last.values().all(Option::is_some) && members.len() == n {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the Services were never labelled over {n} members: {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_mode_ensures_each_load_balancer_once_and_never_deletes_on_a_move() {
    init_tracing();
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let cloud = fleet_cloud(3);
    create_nodes(&client, (0..3).map(node_name)).await;
    let replica = |id: &str| {
        let mut config = replica_config(id);
        config.shard_assignment = "label".into();
        start_manager(
            client.clone(),
            Arc::new(cloud.with_caller(id)),
            options(&["--concurrent-service-syncs=2"]),
            config,
        )
    };
    let mut replicas = vec![replica("r0"), replica("r1")];
    ring_of(&client, 2).await;
    let names: BTreeSet<String> = (0..20).map(service_name).collect();
    create_services(&client, names.iter().cloned()).await;
    provisioned(&client, &cloud, &names).await;
    labelled_over(&client, 2).await;
    // One owner per Service. The owner may ensure twice (a re-verification after a relist on a
    // loaded machine is upstream's behaviour too); two replicas never.
    for (key, callers) in ensurers(&cloud) {
        let owners: BTreeSet<&String> = callers.iter().collect();
        assert_eq!(owners.len(), 1, "{key} was ensured by {callers:?}");
    }

    // A third replica: a share of the labels moves to it, every load balancer stays.
    replicas.push(replica("r2"));
    ring_of(&client, 3).await;
    labelled_over(&client, 3).await;
    provisioned(&client, &cloud, &names).await;
    assert!(
        cloud.calls_to(Method::EnsureLoadBalancerDeleted).is_empty(),
        "a load balancer was deleted because its Service moved"
    );
    assert_no_overlap(&cloud);
    for (stop, task) in replicas {
        stop.cancel();
        task.await.expect("join").expect("stopped cleanly");
    }
}
