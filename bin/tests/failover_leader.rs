//! Leader failover of the cloud-controller-manager (issues 5, 9 and 13): replicas of the real manager
//! with leader election on one kube-testenv, each talking to one shared fake cloud through its
//! own caller-tagged handle, so the cloud's call log shows which replica acted and when.
//!
//! Each replica runs on its own tokio runtime: shutting that runtime down mid-flight is the
//! in-process equivalent of `kill -9` (no drain, no release), which dropping the `run` future
//! alone is not (tasks it spawned would survive). Durations are scaled down (lease 1 s, renew
//! deadline 0.7 s, retry 0.2 s); the Lease stores whole seconds, as upstream.
//!
//! Measured times are printed (`failover:` lines) and recorded in docs/reliability.md.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use cloud_controllers::cloud::CloudProvider;
use cloud_controllers::options::CloudOptions;
use cloud_controllers::{CloudContext, cloud_initializers};
use controller_manager::leader::LeaderElectionConfig;
use controller_manager::manager::{Manager, ManagerConfig, ManagerError};
use fake_cloud::{CloudCall, FakeCloud, FakeInstance, Method};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::PostParams;
use kube_testenv::TestEnv;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LEASE_NS: &str = "kube-system";
const LEASE: &str = "cloud-controller-manager";

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    cloud: CloudOptions,
}

#[derive(Clone, Copy)]
struct Timing {
    lease: Duration,
    renew: Duration,
    retry: Duration,
}

/// The scaled-down timing: 1 s / 0.7 s / 0.2 s.
const FAST: Timing = Timing {
    lease: Duration::from_secs(1),
    renew: Duration::from_millis(700),
    retry: Duration::from_millis(200),
};

/// The longest a standby can need to notice an unrenewed lease and take it: the lease duration
/// after the last renewal it saw, plus one jittered retry (× 2.2) to see it, plus one to act.
fn takeover_bound(t: Timing) -> Duration {
    t.lease + t.retry.mul_f64(2.2 * 2.0) + Duration::from_millis(300)
}

/// One manager replica on its own runtime; see the module docs.
struct Replica {
    runtime: Option<tokio::runtime::Runtime>,
    stop: CancellationToken,
    task: Option<JoinHandle<Result<(), ManagerError>>>,
}

impl Replica {
    /// Starts replica `id`, talking to the API server through `kube_config` (`env.config()`, or a
    /// [`Partition`]'s).
    fn start(
        kube_config: kube::Config,
        cloud: &FakeCloud,
        id: &str,
        t: Timing,
        release_on_cancel: bool,
        graceful: Duration,
    ) -> Replica {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(id)
            .enable_all()
            .build()
            .expect("replica runtime");
        let mut config = ManagerConfig::new("cloud-controller-manager");
        config.graceful_shutdown_timeout = graceful;
        config.cache_sync_timeout = Duration::from_secs(30);
        config.leader_election = Some(LeaderElectionConfig {
            lease_name: LEASE.into(),
            lease_namespace: LEASE_NS.into(),
            identity: id.into(),
            lease_duration: t.lease,
            renew_deadline: t.renew,
            retry_period: t.retry,
            release_on_cancel,
        });
        let opts = Flags::parse_from([
            "test",
            "--node-monitor-period=100ms",
            "--configure-cloud-routes=false",
        ])
        .cloud;
        let cloud: Arc<dyn CloudProvider> = Arc::new(cloud.with_caller(id));
        let stop = CancellationToken::new();
        let token = stop.clone();
        // The client is built inside the replica's runtime, so its connection tasks die with it.
        let task = runtime.spawn(async move {
            let client = kube::Client::try_from(kube_config).expect("client");
            Manager::new(config, client, CloudContext::new(cloud, opts))
                .with_initializers(cloud_initializers())
                .run(token)
                .await
        });
        Replica {
            runtime: Some(runtime),
            stop,
            task: Some(task),
        }
    }

    /// `kill -9`: every task of this replica is dropped where it stands; nothing is released.
    fn kill(&mut self) {
        self.task = None;
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }

    /// An embedder drops the `run` future (task aborted, `select!` took another branch) while
    /// the process lives on.
    fn drop_future(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    /// SIGTERM: stop taking work, drain, release the Lease if configured; waits for `run`.
    async fn stop(&mut self) -> Result<(), ManagerError> {
        self.stop.cancel();
        let task = self.task.take().expect("replica still running");
        task.await.expect("manager task")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A TCP proxy in front of the API server that the test can cut, as a network partition cuts one
/// replica off: after [`Self::cut`] open connections are dropped and new ones refused.
struct Partition {
    addr: std::net::SocketAddr,
    cut: CancellationToken,
}

impl Partition {
    async fn start(env: &TestEnv) -> Partition {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let upstream = env.addr();
        let cut = CancellationToken::new();
        let stop = cut.clone();
        tokio::spawn(async move {
            loop {
                let (mut inbound, _) = tokio::select! {
                    _ = stop.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok(accepted) => accepted,
                        Err(_) => return,
                    },
                };
                let stop = stop.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = stop.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    }
                });
            }
        });
        Partition { addr, cut }
    }

    /// A client config for `env` that goes through this proxy.
    fn config(&self, env: &TestEnv) -> kube::Config {
        let mut config = env.config();
        config.cluster_url = format!("http://{}", self.addr).parse().expect("proxy url");
        config
    }

    fn cut(&self) {
        self.cut.cancel();
    }
}

async fn holder(env: &TestEnv) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(env.client(), LEASE_NS);
    leases
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

/// Replicas a and b on `t` (a 2 s drain): a leads and calls the cloud, and b has watched a's
/// Lease for three retry periods.
async fn leader_and_standby(
    env: &TestEnv,
    cloud: &FakeCloud,
    t: Timing,
    release_on_cancel: bool,
) -> (Replica, Replica) {
    let graceful = Duration::from_secs(2);
    let a = Replica::start(env.config(), cloud, "a", t, release_on_cancel, graceful);
    let (first, _) = wait_new_holder(env, None, Duration::from_secs(20)).await;
    assert_eq!(first, "a");
    wait_acting(cloud, "a").await;
    let b = Replica::start(env.config(), cloud, "b", t, release_on_cancel, graceful);
    // b must have seen a's lease as valid before a goes, or it could win on its first try.
    tokio::time::sleep(t.retry * 3).await;
    (a, b)
}

/// Stops replica `id` gracefully; it must stop cleanly.
async fn stop_replica(replicas: &mut BTreeMap<String, Replica>, id: &str) {
    let replica = replicas.get_mut(id).expect("leader");
    replica.stop().await.expect("clean stop");
}

/// Waits (polling the Lease, the only place leadership is visible from outside) until a holder
/// other than `not` holds it; returns who and how long it took.
async fn wait_new_holder(env: &TestEnv, not: Option<&str>, within: Duration) -> (String, Duration) {
    let start = Instant::now();
    loop {
        if let Some(h) = holder(env).await
            && Some(h.as_str()) != not
        {
            return (h, start.elapsed());
        }
        assert!(
            start.elapsed() < within,
            "no new leader within {within:?} (previous {not:?})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `who` has made a cloud call, i.e. its controllers really run.
async fn wait_acting(cloud: &FakeCloud, who: &str) {
    tokio::time::timeout(Duration::from_secs(20), async {
        while !cloud
            .calls()
            .iter()
            .any(|c| c.caller.as_deref() == Some(who))
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{who} leads but never called the cloud"));
}

/// The callers of the log, consecutive repeats collapsed: `[a, b]` means every call of `a`
/// completed before the first call of `b`.
fn runs(calls: &[CloudCall]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in calls {
        let who = c.caller.clone().unwrap_or_else(|| "<untagged>".into());
        if out.last() != Some(&who) {
            out.push(who);
        }
    }
    out
}

async fn cluster(nodes: usize) -> (TestEnv, FakeCloud) {
    let env = TestEnv::start().await.expect("testenv");
    let mut b = FakeCloud::builder();
    let api: Api<Node> = Api::all(env.client());
    for i in 0..nodes {
        let name = format!("node-{i}");
        b = b.instance(
            FakeInstance::new(name.clone())
                .provider_id(format!("fake://{name}"))
                .internal_ip(format!("10.0.0.{}", i + 1)),
        );
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": { "taints": [{
                "key": "node.cloudprovider.kubernetes.io/uninitialized",
                "value": "true", "effect": "NoSchedule"
            }]}
        }))
        .expect("node");
        api.create(&PostParams::default(), &node)
            .await
            .expect("create node");
    }
    (env, b.build().expect("cloud"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_leader_is_replaced_by_exactly_one_standby_within_the_lease_duration() {
    let (env, cloud) = cluster(3).await;
    let graceful = Duration::from_secs(2);
    let mut replicas: BTreeMap<String, Replica> = ["a", "b", "c"]
        .into_iter()
        .map(|id| {
            (
                id.to_string(),
                Replica::start(env.config(), &cloud, id, FAST, false, graceful),
            )
        })
        .collect();
    let bound = takeover_bound(FAST);

    let (first, _) = wait_new_holder(&env, None, Duration::from_secs(20)).await;
    wait_acting(&cloud, &first).await;

    // 1. Cancelled without release: the lease must run out before anyone else takes over.
    stop_replica(&mut replicas, &first).await;
    let (second, took) = wait_new_holder(&env, Some(&first), bound).await;
    println!("failover: cancel-without-release {first} -> {second} in {took:?} (bound {bound:?})");
    wait_acting(&cloud, &second).await;

    // 2. Abrupt death: the process is gone mid-flight.
    replicas.get_mut(&second).expect("leader").kill();
    let (third, took) = wait_new_holder(&env, Some(&second), bound).await;
    println!("failover: abrupt-kill {second} -> {third} in {took:?} (bound {bound:?})");
    assert_ne!(third, first, "a stopped replica came back");
    wait_acting(&cloud, &third).await;

    stop_replica(&mut replicas, &third).await;

    // Exactly one leader at a time: the call log splits into one run per leader, in order.
    let calls = cloud.calls();
    println!(
        "failover: {} cloud calls, by leader in order: {:?}",
        calls.len(),
        runs(&calls)
    );
    assert_eq!(
        runs(&calls),
        vec![first, second, third],
        "replicas' cloud calls interleave"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_run_future_stops_the_replica_so_leaders_never_overlap() {
    let (env, cloud) = cluster(2).await;
    let (mut a, mut b) = leader_and_standby(&env, &cloud, FAST, false).await;

    a.drop_future();
    let bound = takeover_bound(FAST);
    let (second, took) = wait_new_holder(&env, Some("a"), bound).await;
    println!("failover: dropped-future a -> {second} in {took:?} (bound {bound:?})");
    assert_eq!(second, "b");
    wait_acting(&cloud, "b").await;
    // Give a's orphaned workers, if any, time to show up in the log.
    tokio::time::sleep(FAST.lease).await;
    b.stop().await.expect("clean stop");
    assert_eq!(
        runs(&cloud.calls()),
        vec!["a".to_string(), "b".to_string()],
        "the dropped replica kept acting"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_releases_the_lease_and_the_standby_leads_within_a_retry_period() {
    // A long lease makes "within a retry period" distinguishable from "after the lease ran out".
    let t = Timing {
        lease: Duration::from_secs(5),
        renew: Duration::from_secs(3),
        retry: Duration::from_millis(200),
    };
    let (env, cloud) = cluster(2).await;
    let (mut a, mut b) = leader_and_standby(&env, &cloud, t, true).await;

    a.stop().await.expect("clean stop");
    let (second, took) = wait_new_holder(&env, Some("a"), t.lease).await;
    println!(
        "failover: graceful a -> {second} in {took:?} (retry period {:?}, lease {:?})",
        t.retry, t.lease
    );
    assert_eq!(second, "b");
    // One jittered retry (× 2.2) plus scheduling slack, far below the 5 s lease.
    assert!(
        took < t.retry.mul_f64(2.2) + Duration::from_millis(400),
        "took {took:?}"
    );
    wait_acting(&cloud, "b").await;
    b.stop().await.expect("clean stop");
    assert_eq!(
        holder(&env).await,
        None,
        "lease not released on graceful stop"
    );
    assert_eq!(runs(&cloud.calls()), vec!["a".to_string(), "b".to_string()]);
}

/// Creates Service default/web of type LoadBalancer; returns the Services API.
async fn create_lb_service(env: &TestEnv) -> Api<Service> {
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": "web", "namespace": "default" },
        "spec": { "type": "LoadBalancer", "selector": { "app": "web" },
                  "ports": [{ "port": 80, "protocol": "TCP" }] }
    }))
    .expect("service");
    let created = services.create(&PostParams::default(), &svc).await;
    created.expect("create service");
    services
}

fn ingress(svc: &Service) -> bool {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|i| !i.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_an_in_flight_reconcile_then_releases_the_lease() {
    let (env, cloud) = cluster(1).await;
    let held = cloud.hold(Method::EnsureLoadBalancer);
    let mut a = Replica::start(
        env.config(),
        &cloud,
        "a",
        FAST,
        true,
        Duration::from_secs(10),
    );
    wait_new_holder(&env, None, Duration::from_secs(20)).await;
    let services = create_lb_service(&env).await;
    held.wait_for_calls(1).await;

    a.stop.cancel();
    // Shutdown must be waiting for the parked reconcile, not done without it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        a.task.as_ref().is_some_and(|t| !t.is_finished()),
        "did not wait for the in-flight reconcile"
    );
    held.release();
    a.stop().await.expect("clean stop");

    let ensured = cloud.calls_to(Method::EnsureLoadBalancer);
    assert_eq!(ensured.len(), 1, "{ensured:?}");
    assert!(ensured[0].outcome.is_ok());
    let svc = services.get("web").await.expect("service");
    assert!(
        ingress(&svc),
        "reconcile finished in the cloud but not in the API: {svc:?}"
    );
    assert_eq!(holder(&env).await, None, "lease not released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_abandons_a_stuck_reconcile_at_the_deadline_and_it_never_acts() {
    let (env, cloud) = cluster(1).await;
    let held = cloud.hold(Method::EnsureLoadBalancer);
    let deadline = Duration::from_millis(500);
    let mut a = Replica::start(env.config(), &cloud, "a", FAST, true, deadline);
    wait_new_holder(&env, None, Duration::from_secs(20)).await;
    let services = create_lb_service(&env).await;
    held.wait_for_calls(1).await;

    let started = Instant::now();
    a.stop().await.expect("stop after the deadline");
    let took = started.elapsed();
    assert!(
        took >= deadline,
        "returned before the drain deadline: {took:?}"
    );
    assert_eq!(holder(&env).await, None, "lease not released");

    // The abandoned reconcile was dropped: letting the cloud answer now completes nothing.
    // (Absence can only be checked by giving it time to happen.)
    held.release();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        cloud.calls_to(Method::EnsureLoadBalancer).is_empty(),
        "an abandoned reconcile reached the cloud after shutdown: {:?}",
        cloud.calls()
    );
    let svc = services.get("web").await.expect("service");
    assert!(
        !ingress(&svc),
        "abandoned reconcile wrote status after shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_drops_its_in_flight_reconcile_before_run_returns() {
    let (env, cloud) = cluster(1).await;
    let held = cloud.hold(Method::EnsureLoadBalancer);
    let partition = Partition::start(&env).await;
    // A long drain deadline: draining would keep A's reconcile alive past the takeover.
    let graceful = Duration::from_secs(30);
    let mut a = Replica::start(partition.config(&env), &cloud, "a", FAST, true, graceful);
    let (first, _) = wait_new_holder(&env, None, Duration::from_secs(20)).await;
    assert_eq!(first, "a");
    create_lb_service(&env).await;
    // A's reconcile is now in flight, parked inside the cloud call.
    held.wait_for_calls(1).await;
    let mut b = Replica::start(env.config(), &cloud, "b", FAST, true, graceful);
    tokio::time::sleep(FAST.retry * 3).await;

    // A can no longer renew; its Lease expires and B takes it.
    partition.cut();
    let task = a.task.take().expect("a runs");
    let lost = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("A's run did not return after losing the Lease")
        .expect("manager task");
    assert!(
        matches!(lost, Err(ManagerError::Leader(_))),
        "expected lost leadership, got {lost:?}"
    );
    let (second, took) = wait_new_holder(&env, Some("a"), takeover_bound(FAST)).await;
    assert_eq!(second, "b");
    println!("failover: partitioned a -> b in {took:?}");
    wait_acting(&cloud, "b").await;

    // Had A's reconcile survived its `run`, it would complete its cloud call now.
    held.release();
    tokio::time::timeout(Duration::from_secs(20), async {
        while !cloud
            .calls_to(Method::EnsureLoadBalancer)
            .iter()
            .any(|c| c.caller.as_deref() == Some("b"))
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("b never ensured the load balancer");
    b.stop().await.expect("clean stop");
    let calls = cloud.calls();
    assert!(
        !calls
            .iter()
            .any(|c| c.method == Method::EnsureLoadBalancer && c.caller.as_deref() == Some("a")),
        "A's in-flight reconcile reached the cloud after A lost the Lease: {calls:?}"
    );
    assert_eq!(
        runs(&calls),
        vec!["a".to_string(), "b".to_string()],
        "the two leaders' cloud calls overlap"
    );
}
