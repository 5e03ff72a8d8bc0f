//! Three processes of the real binary with `--sharded-controllers=service` on one kube-testenv:
//! each load balancer is ensured by exactly one of them, and all three take a share; a `kill -9`
//! of one leaves its Services to the other two once its Lease expires, and the Services created
//! after it are provisioned within the lease duration + 10 s; restarted, it takes back its share,
//! then a SIGTERM of another hands its Services over with no expiry to wait for; across all four
//! processes no two ever had a call for one Service in flight at once.
//!
//! Each process has its own fake cloud (a process cannot share another's memory), which appends
//! every call to its own file (`callLogFile`) with wall-clock times: the checks read those files.
//! The in-process suite (`controllers/tests/service_sharded.rs`) checks the same over one cloud,
//! and `framework/src/shard/handover_tests.rs` proves "never two at once" on a paused clock.
//!
//! Both assignment modes run. The default run is the figures scaled to a fifth (60
//! Services, then 18); set `SHARDED_REPLICAS_SERVICES=300` for the 300 and 90, and the
//! 60–140 share bound.
//!
//! In label mode, once two processes remain, a user allowed nothing but `patch services` sets
//! the shard label of a provisioned Service to a value no process has (issue 36): a port change
//! after it still makes a cloud call, a delete after it still completes, and a Service created
//! with another cluster's label is provisioned, each within 15 s.

mod admin_support;
mod cluster_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use admin_support::{Ccm, scratch_dir};
use cluster_support::{
    Call, create_lb_services, create_ready_nodes, has_ingress, read_call_log, unix_micros,
};
use controller_manager::shard::{LABEL_PREFIX, RING_LABEL, VIEW_ANNOTATION, member_value};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::json;

/// Lease 3 s, renew deadline 2.5 s, retry 0.5 s: leader election's durations, which the rings
/// use; the renew deadline leaves room for a loaded CI machine's scheduling.
const LEASE: Duration = Duration::from_secs(3);
const NODES: usize = 3;

fn flags(cloud_config: &Path, assignment: &str) -> Vec<String> {
    vec![
        format!("--cloud-config={}", cloud_config.display()),
        "--controllers=service".into(),
        "--sharded-controllers=service".into(),
        "--leader-elect=true".into(),
        "--leader-elect-lease-duration=3s".into(),
        "--leader-elect-renew-deadline=2500ms".into(),
        "--leader-elect-retry-period=500ms".into(),
        format!("--shard-assignment={assignment}"),
    ]
}

/// One process: its scratch directory holds its cloud config, call log and stderr.
struct Replica {
    dir: PathBuf,
    ccm: Option<Ccm>,
}

impl Replica {
    async fn start(env: &TestEnv, assignment: &str, tag: &str) -> Replica {
        let dir = scratch_dir(&format!("sharded-{assignment}-{tag}")).expect("scratch dir");
        let mut config = String::from("instances:\n");
        for i in 0..NODES {
            config.push_str(&format!("  - {{name: node-{i}}}\n"));
        }
        // Wide enough for every Service, as each process's cloud hands out its own addresses;
        // 20 ms per ensure, so two processes' calls for one Service would overlap if they raced.
        config.push_str(&format!(
            "loadBalancerPool: {{cidr: 10.200.0.0/20}}\nlatency: {{EnsureLoadBalancer: 20ms}}\n\
             callLogFile: {}\n",
            dir.join("calls.jsonl").display()
        ));
        let cloud_config = dir.join("cloud-config.yaml");
        std::fs::write(&cloud_config, config).expect("cloud config");
        let ccm = Ccm::start(env, &dir, &flags(&cloud_config, assignment))
            .await
            .expect("replica starts");
        Replica {
            dir,
            ccm: Some(ccm),
        }
    }

    /// `kill -9` (what dropping a [`Ccm`] does): no drain, no Lease release.
    fn kill(&mut self) {
        self.ccm = None;
    }

    /// The load-balancer calls its cloud logged.
    fn calls(&self) -> Vec<Call> {
        read_call_log(&self.dir.join("calls.jsonl"))
            .into_iter()
            .filter(|c| c.method.contains("LoadBalancer"))
            .collect()
    }

    fn logs(&self) -> String {
        self.ccm.as_ref().map(Ccm::logs).unwrap_or_default()
    }
}

/// Service keys each replica ensured successfully from `since` (µs) on.
fn ensured_since(replicas: &[&Replica], since: u64) -> Vec<BTreeSet<String>> {
    replicas
        .iter()
        .map(|r| {
            r.calls()
                .into_iter()
                .filter(|c| c.method == "EnsureLoadBalancer" && c.ok && c.started >= since)
                .map(|c| c.key)
                .collect()
        })
        .collect()
}

/// How many successful EnsureLoadBalancer calls each replica made from `since` on.
fn ensure_counts(replicas: &[&Replica], since: u64) -> Vec<usize> {
    replicas
        .iter()
        .map(|r| {
            r.calls()
                .iter()
                .filter(|c| c.method == "EnsureLoadBalancer" && c.ok && c.started >= since)
                .count()
        })
        .collect()
}

/// Every successful EnsureLoadBalancer of a Service that had more than one, by process.
fn repeated_ensures(replicas: &[&Replica], since: u64) -> BTreeMap<String, Vec<(usize, u64)>> {
    let mut by_key: BTreeMap<String, Vec<(usize, u64)>> = BTreeMap::new();
    for (i, r) in replicas.iter().enumerate() {
        for c in r.calls() {
            if c.method == "EnsureLoadBalancer" && c.ok && c.started >= since {
                by_key.entry(c.key).or_default().push((i, c.started));
            }
        }
    }
    by_key.retain(|_, calls| calls.len() > 1);
    by_key
}

/// The overlap checker: no two processes ever had calls for one Service in flight at once.
fn assert_no_overlap(replicas: &[&Replica]) {
    let mut by_key: BTreeMap<String, Vec<(usize, Call)>> = BTreeMap::new();
    for (i, r) in replicas.iter().enumerate() {
        for call in r.calls() {
            by_key.entry(call.key.clone()).or_default().push((i, call));
        }
    }
    for (key, calls) in &by_key {
        for (n, (i, a)) in calls.iter().enumerate() {
            for (j, b) in calls[n + 1..].iter().filter(|(j, _)| j != i) {
                let apart = a.finished <= b.started || b.finished <= a.started;
                assert!(
                    apart,
                    "{key}: replica {i}'s {a:?} and replica {j}'s {b:?} were in flight at once"
                );
            }
        }
    }
}

/// Waits until every Service in `names` has an ingress address.
async fn provisioned(client: &kube::Client, names: &BTreeSet<String>, replicas: &[&Replica]) {
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let mut missing = names.clone();
    for _ in 0..600 {
        let list = api.list(&ListParams::default()).await.expect("services");
        for svc in list.items.iter().filter(|s| has_ingress(s)) {
            missing.remove(&svc.name_any());
        }
        if missing.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let logs: Vec<String> = replicas.iter().map(|r| r.logs()).collect();
    panic!(
        "{} Services were never provisioned, e.g. {:?}:\n{}",
        missing.len(),
        missing.iter().next(),
        logs.join("\n----\n")
    );
}

/// Waits until the ring has `n` member Leases that all publish one view.
async fn ring_of(client: &kube::Client, n: usize) {
    let api: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let mut last = BTreeMap::new();
    for _ in 0..200 {
        let leases = api
            .list(&ListParams::default().labels(RING_LABEL))
            .await
            .expect("leases");
        last = leases
            .items
            .into_iter()
            .map(|l| {
                let view = l
                    .metadata
                    .annotations
                    .and_then(|a| a.get(VIEW_ANNOTATION).cloned());
                (l.metadata.name.unwrap_or_default(), view)
            })
            .collect::<BTreeMap<_, _>>();
        let views: BTreeSet<_> = last.values().collect();
        if last.len() == n && views.len() == 1 && views.iter().all(|v| v.is_some()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the ring never settled on {n} members: {last:?}");
}

fn names(range: std::ops::Range<usize>) -> BTreeSet<String> {
    range.map(|i| format!("lb-{i:04}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_share_the_load_balancers_survive_a_kill_and_rebalance() {
    scenario("hash").await;
}

/// Label mode: each process caches only the Services labelled to it, and claims new ones with a
/// label patch each, spending its client's QPS; its ring Lease renews on a client of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_label_mode_too() {
    scenario("label").await;
}

/// The bearer token of the user allowed nothing but `patch services` (label mode).
const PATCHER_TOKEN: &str = "patcher-token";
/// How long a Service whose label names no replica may wait for its cloud call.
const RELABELLED_WITHIN: Duration = Duration::from_secs(15);

async fn scenario(assignment: &str) {
    let first: usize = std::env::var("SHARDED_REPLICAS_SERVICES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let second = first * 3 / 10;
    let label_mode = assignment == "label";
    let env = TestEnv::builder()
        .static_token(PATCHER_TOKEN, "patcher", "", &[])
        .authorization(label_mode)
        .start()
        .await
        .expect("testenv");
    let client = env.client();
    create_ready_nodes(&client, (0..NODES).map(|i| format!("node-{i}"))).await;
    let mut replicas = Vec::new();
    for tag in ["r0", "r1", "r2"] {
        replicas.push(Replica::start(&env, assignment, tag).await);
    }
    ring_of(&client, 3).await;

    // The first Services: each ensured by exactly one process; all three take a share.
    let start = unix_micros();
    let first_names = names(0..first);
    create_lb_services(&client, first_names.iter().cloned()).await;
    let all: Vec<&Replica> = replicas.iter().collect();
    provisioned(&client, &first_names, &all).await;
    let ensured = ensured_since(&all, start);
    let counts = ensure_counts(&all, start);
    println!(
        "sharded_replicas ({assignment}): EnsureLoadBalancer per process for the first {first}: {counts:?}"
    );
    assert_eq!(
        counts.iter().sum::<usize>(),
        first,
        "{counts:?}; ensured more than once: {:?}",
        repeated_ensures(&all, start)
    );
    assert!(counts.iter().all(|&n| n > 0), "{counts:?}");
    if first >= 300 {
        let (low, high) = (first / 5, first * 7 / 15);
        assert!(
            counts.iter().all(|n| (low..=high).contains(n)),
            "{counts:?}"
        );
    }
    let owners: BTreeSet<&String> = ensured.iter().flatten().collect();
    assert_eq!(owners.len(), first, "a Service ensured by two processes");

    // kill -9 one: the other two take its Services once its Lease expires, and provision the
    // new ones within the lease duration + 10 s.
    replicas[2].kill();
    let killed = Instant::now();
    let after_kill = unix_micros();
    let second_names = names(first..first + second);
    create_lb_services(&client, second_names.iter().cloned()).await;
    let live: Vec<&Replica> = replicas[..2].iter().collect();
    provisioned(&client, &second_names, &live).await;
    let took = killed.elapsed();
    println!(
        "sharded_replicas ({assignment}): {second} Services provisioned {took:?} after the kill (lease {LEASE:?})"
    );
    assert!(took < LEASE + Duration::from_secs(10), "took {took:?}");
    let new_ensured = ensured_since(&live, after_kill);
    for name in &second_names {
        let key = format!("default/{name}");
        let by: Vec<usize> = (0..2).filter(|&i| new_ensured[i].contains(&key)).collect();
        assert_eq!(by.len(), 1, "{key} ensured by {by:?}");
    }
    // The killed process's Services are re-verified by their new owners.
    let orphans = &ensured[2];
    for _ in 0..100 {
        let taken = ensured_since(&live, after_kill);
        if orphans
            .iter()
            .all(|k| taken[0].contains(k) || taken[1].contains(k))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let taken = ensured_since(&live, after_kill);
    for key in orphans {
        assert!(
            taken[0].contains(key) || taken[1].contains(key),
            "{key}, the killed process's, was not taken over"
        );
    }

    // Restarted (a new process, a new identity): it takes back a share of what exists, by
    // handover, and the overlap checker over all four processes finds nothing.
    let rejoined = unix_micros();
    replicas.push(Replica::start(&env, assignment, "r2-again").await);
    ring_of(&client, 3).await;
    let back = &replicas[3];
    // Until its count has held for a second: the handover is over.
    let (mut regained, mut held) = (0, 0);
    for _ in 0..150 {
        let now = ensure_counts(&[back], rejoined)[0];
        held = if now == regained { held + 1 } else { 0 };
        regained = now;
        if regained > 0 && held >= 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "sharded_replicas ({assignment}): the restarted process re-verified {regained} Services"
    );
    assert!(
        regained > 0 && regained < first + second,
        "the restarted process took {regained} of {} Services",
        first + second
    );

    // SIGTERM one: it drains, deletes its ring Lease and exits 0; the other two take its
    // Services without waiting for any expiry, and re-verify each of them.
    // What r0 holds now: the Services whose latest ensure was its own.
    let mut latest: BTreeMap<String, (u64, usize)> = BTreeMap::new();
    for (i, r) in replicas.iter().enumerate() {
        for c in r.calls() {
            if c.method == "EnsureLoadBalancer" && c.ok {
                let entry = latest.entry(c.key).or_insert((c.started, i));
                if c.started >= entry.0 {
                    *entry = (c.started, i);
                }
            }
        }
    }
    let mine_before: BTreeSet<String> = latest
        .into_iter()
        .filter(|(_, (_, i))| *i == 0)
        .map(|(key, _)| key)
        .collect();
    assert!(!mine_before.is_empty(), "r0 holds no Service");
    let stopped = unix_micros();
    let stopping = Instant::now();
    let ccm = replicas[0].ccm.as_mut().expect("r0 runs");
    let status = ccm.terminate().await.expect("r0 stops");
    assert!(status.success(), "SIGTERM is a clean exit: {status}");
    let survivors = [&replicas[1], &replicas[3]];
    let mut taken = Vec::new();
    for _ in 0..200 {
        taken = ensured_since(&survivors, stopped);
        if mine_before
            .iter()
            .all(|k| taken.iter().any(|t| t.contains(k)))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left: Vec<&String> = mine_before
        .iter()
        .filter(|k| !taken.iter().any(|t| t.contains(*k)))
        .collect();
    assert!(
        left.is_empty(),
        "not taken over after the graceful stop: {left:?}"
    );
    println!(
        "sharded_replicas ({assignment}): {} Services re-verified {:?} after a SIGTERM",
        mine_before.len(),
        stopping.elapsed()
    );
    ring_of(&client, 2).await;
    if label_mode {
        labels_naming_no_replica_are_claimed(&env, &survivors).await;
    }
    let all: Vec<&Replica> = replicas.iter().collect();
    assert_no_overlap(&all);
}

/// Waits up to [`RELABELLED_WITHIN`] until a replica's cloud logged a successful `method` for
/// `default/name` from `since` (µs) on; how long it took.
async fn cloud_call(replicas: &[&Replica], method: &str, name: &str, since: u64) -> Duration {
    let (key, start) = (format!("default/{name}"), Instant::now());
    while start.elapsed() < RELABELLED_WITHIN {
        let called = replicas.iter().any(|r| {
            r.calls()
                .iter()
                .any(|c| c.method == method && c.key == key && c.ok && c.started >= since)
        });
        if called {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let logs: Vec<String> = replicas.iter().map(|r| r.logs()).collect();
    panic!(
        "no {method} for {key} within {RELABELLED_WITHIN:?}:\n{}",
        logs.join("\n----\n")
    );
}

/// The repros: a user with only `patch services` labels a provisioned Service to a
/// value no replica has, then changes its port, then (labelled so again) deletes it; and a
/// Service is created labelled to another cluster's replica, as a restore from that cluster's
/// backup is.
async fn labels_naming_no_replica_are_claimed(env: &TestEnv, replicas: &[&Replica]) {
    let client = env.client();
    let rbac = json!({"apiGroup": "rbac.authorization.k8s.io"});
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "patch-services"},
        "rules": [{"apiGroups": [""], "resources": ["services"], "verbs": ["patch"]}],
    }))
    .expect("role");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "patch-services"},
        "roleRef": {"apiGroup": rbac["apiGroup"], "kind": "Role", "name": "patch-services"},
        "subjects": [{"apiGroup": rbac["apiGroup"], "kind": "User", "name": "patcher"}],
    }))
    .expect("binding");
    let pp = PostParams::default();
    Api::<Role>::namespaced(client.clone(), "default")
        .create(&pp, &role)
        .await
        .expect("role");
    Api::<RoleBinding>::namespaced(client.clone(), "default")
        .create(&pp, &binding)
        .await
        .expect("binding");
    let patcher = kube::Client::try_from(env.config_with_token(PATCHER_TOKEN)).expect("client");
    let as_patcher: Api<Service> = Api::namespaced(patcher, "default");
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc = api.get("lb-0000").await.expect("lb-0000");
    let key = svc
        .labels()
        .keys()
        .find(|k| k.starts_with(LABEL_PREFIX))
        .cloned()
        .expect("lb-0000 carries its shard label");
    let relabel = |name: &'static str, value: String| {
        let (api, key) = (as_patcher.clone(), key.clone());
        async move {
            let patch = json!({"metadata": {"labels": {key: value}}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("the patcher may patch services");
        }
    };
    assert!(
        as_patcher.get("lb-0000").await.is_err(),
        "the patcher may not even get"
    );

    // A bogus value, then a port change: a cloud call for the new port.
    relabel("lb-0000", "0000000000000000".into()).await;
    let changed = unix_micros();
    let ports = json!({"spec": {"ports": [{"port": 81}]}});
    as_patcher
        .patch("lb-0000", &PatchParams::default(), &Patch::Merge(&ports))
        .await
        .expect("port change");
    let took = cloud_call(replicas, "EnsureLoadBalancer", "lb-0000", changed).await;
    println!("sharded_replicas (label): a port change after a bogus label was ensured in {took:?}");

    // Another cluster's value, then a delete: the finalizer goes, and so does the Service.
    relabel("lb-0000", member_value("a-replica-of-another-cluster")).await;
    let deleting = (unix_micros(), Instant::now());
    api.delete("lb-0000", &DeleteParams::default())
        .await
        .expect("delete");
    cloud_call(replicas, "EnsureLoadBalancerDeleted", "lb-0000", deleting.0).await;
    while api.get_opt("lb-0000").await.expect("get").is_some() {
        assert!(
            deleting.1.elapsed() < RELABELLED_WITHIN,
            "lb-0000 still Terminating after {RELABELLED_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "sharded_replicas (label): deleted after a foreign label in {:?}",
        deleting.1.elapsed()
    );

    // Created with another cluster's label: provisioned.
    let created = unix_micros();
    let restored: Service = serde_json::from_value(json!({
        "metadata": {"name": "restored", "labels": {key: member_value("a-replica-of-another-cluster")}},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }))
    .expect("service");
    api.create(&pp, &restored).await.expect("restored");
    let took = cloud_call(replicas, "EnsureLoadBalancer", "restored", created).await;
    provisioned(&client, &BTreeSet::from(["restored".to_string()]), replicas).await;
    println!(
        "sharded_replicas (label): a Service restored with a foreign label was ensured in {took:?}"
    );
}
