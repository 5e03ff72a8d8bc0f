//! Leader election end to end: real electors on one embedded API server, real (short) durations:
//! lease 1 s, renew deadline 0.6 s, retry period 0.2 s.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use controller_manager::leader::{LeaderElectionConfig, LeaderElector, LeaderError, LeaderStatus};
use futures::FutureExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube_testenv::TestEnv;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_millis(1000);
const RENEW: Duration = Duration::from_millis(600);
const RETRY: Duration = Duration::from_millis(200);
/// Longest wait between two acquire attempts: `retry × (1 + 1.2)`.
const MAX_RETRY_WAIT: Duration = Duration::from_millis(440);
/// Scheduling and HTTP slack for a loaded 2-core CI machine.
const SLACK: Duration = Duration::from_millis(400);

fn config(identity: &str, release: bool) -> LeaderElectionConfig {
    let mut c = LeaderElectionConfig::new("kube-system", "ccm-e2e", identity);
    c.lease_duration = LEASE;
    c.renew_deadline = RENEW;
    c.retry_period = RETRY;
    c.release_on_cancel = release;
    c
}

struct Replica {
    status: LeaderStatus,
    shutdown: CancellationToken,
    /// How many times this replica started its guarded work.
    led: Arc<AtomicUsize>,
    task: JoinHandle<Result<(), LeaderError>>,
}

fn replica(env: &TestEnv, identity: &str, release: bool) -> Replica {
    let elector = LeaderElector::new(env.client(), config(identity, release)).unwrap();
    let status = elector.status();
    let shutdown = CancellationToken::new();
    let led = Arc::new(AtomicUsize::new(0));
    let counter = led.clone();
    let task = tokio::spawn(elector.run(shutdown.clone(), move |token| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { token.cancelled().await }.boxed()
    }));
    Replica {
        status,
        shutdown,
        led,
        task,
    }
}

async fn holder(env: &TestEnv) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(env.client(), "kube-system");
    leases
        .get("ccm-e2e")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity)
}

/// Waits for whichever of `a`/`b` leads first; returns (leader, standby).
async fn first_leader(a: Replica, b: Replica) -> (Replica, Replica) {
    let (sa, sb) = (a.status.clone(), b.status.clone());
    let a_first = tokio::select! {
        _ = sa.wait_for(|s| s.is_leader) => true,
        _ = sb.wait_for(|s| s.is_leader) => false,
    };
    if a_first { (a, b) } else { (b, a) }
}

#[tokio::test]
async fn only_one_of_two_replicas_leads() {
    let env = TestEnv::start().await.unwrap();
    let (leader, standby) = first_leader(replica(&env, "a", true), replica(&env, "b", true)).await;
    // Several lease durations pass: renewals keep the standby out.
    tokio::time::sleep(LEASE * 3).await;
    assert!(leader.status.is_leader());
    assert!(!standby.status.is_leader());
    assert_eq!(leader.led.load(Ordering::SeqCst), 1);
    assert_eq!(standby.led.load(Ordering::SeqCst), 0);
    let lease_holder = holder(&env).await.unwrap();
    assert_eq!(Some(lease_holder.clone()), leader.status.current().holder);
    assert_eq!(standby.status.current().holder, Some(lease_holder));
    for r in [leader, standby] {
        r.shutdown.cancel();
        r.task.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn graceful_stop_releases_and_the_standby_leads_within_a_retry_period() {
    let env = TestEnv::start().await.unwrap();
    let (leader, standby) = first_leader(replica(&env, "a", true), replica(&env, "b", true)).await;
    let lease_before: Api<Lease> = Api::namespaced(env.client(), "kube-system");
    let transitions = lease_before
        .get("ccm-e2e")
        .await
        .unwrap()
        .spec
        .unwrap()
        .lease_transitions;

    leader.shutdown.cancel();
    leader.task.await.unwrap().unwrap();
    let released_at = Instant::now();
    assert_eq!(
        holder(&env).await.as_deref(),
        Some(""),
        "released: empty holder"
    );

    standby.status.wait_for(|s| s.is_leader).await.unwrap();
    let handover = released_at.elapsed();
    assert!(
        handover <= MAX_RETRY_WAIT + SLACK,
        "standby took {handover:?}, want within one (jittered) retry period"
    );
    let spec = lease_before.get("ccm-e2e").await.unwrap().spec.unwrap();
    assert_eq!(spec.lease_transitions, transitions.map(|t| t + 1));
    standby.shutdown.cancel();
    standby.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_crashed_leader_is_replaced_after_the_lease_duration() {
    let env = TestEnv::start().await.unwrap();
    let (leader, standby) =
        first_leader(replica(&env, "a", false), replica(&env, "b", false)).await;
    // Abrupt stop: no release, no more renewals.
    leader.task.abort();
    let crashed_at = Instant::now();

    standby.status.wait_for(|s| s.is_leader).await.unwrap();
    let takeover = crashed_at.elapsed();
    // The last renewal can precede the crash by up to one retry period.
    assert!(
        takeover >= LEASE - RETRY,
        "took over after {takeover:?}: lease not respected"
    );
    // Expiry runs on the standby's clock from when it *saw* the last renewal (client-go): its next
    // poll after the crash may still see a new record (up to one jittered retry), then the lease
    // runs out, then one more poll.
    assert!(
        takeover <= LEASE + MAX_RETRY_WAIT * 2 + SLACK,
        "took over after {takeover:?}"
    );
    standby.shutdown.cancel();
    standby.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn losing_the_api_server_loses_leadership_within_the_renew_deadline() {
    let env = TestEnv::start().await.unwrap();
    let r = replica(&env, "a", true);
    r.status.wait_for(|s| s.is_leader).await.unwrap();
    env.faults().fail_ratio(1.0, 500);
    let broken_at = Instant::now();
    let result = r.task.await.unwrap();
    assert!(
        matches!(result, Err(LeaderError::LeadershipLost { .. })),
        "{result:?}"
    );
    let lost_after = broken_at.elapsed();
    assert!(lost_after <= RETRY + RENEW + SLACK, "{lost_after:?}");
    assert!(!r.status.is_leader());
    assert!(
        r.status.check(Duration::ZERO).is_ok(),
        "not leader: healthy"
    );
}

#[tokio::test]
async fn healthz_and_metrics_follow_leadership() {
    use controller_manager::admin::{AdminServer, HealthChecks};
    use controller_manager::leader::LeaderMetrics;
    use prometheus_client::registry::Registry;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let env = TestEnv::start().await.unwrap();
    let mut registry = Registry::default();
    let metrics = LeaderMetrics::register(&mut registry);
    let elector = LeaderElector::new(env.client(), config("a", true))
        .unwrap()
        .with_metrics(metrics);
    let status = elector.status();
    let health = HealthChecks::new();
    health.add_check("leaderElection", status.health_check());
    let server = AdminServer::new(
        "127.0.0.1:0".parse().unwrap(),
        health,
        HealthChecks::new(),
        HealthChecks::new(),
        Arc::new(parking_lot::Mutex::new(registry)),
    )
    .unwrap();
    let addr = server.local_addr();
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(server.serve(shutdown.clone()));
    let get = |path: &'static str| async move {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    };

    assert!(
        get("/metrics")
            .await
            .contains("leader_election_master_status{name=\"ccm-e2e\"} 0")
    );
    let task = tokio::spawn(elector.run(shutdown.clone(), |t| {
        async move { t.cancelled().await }.boxed()
    }));
    status.wait_for(|s| s.is_leader).await.unwrap();
    assert!(
        get("/healthz?verbose")
            .await
            .ends_with("[+]leaderElection ok\nhealthz check passed\n")
    );
    assert!(
        get("/metrics")
            .await
            .contains("leader_election_master_status{name=\"ccm-e2e\"} 1")
    );

    shutdown.cancel();
    task.await.unwrap().unwrap();
    serving.await.unwrap().unwrap();
}
