//! SIGTERM in the middle of a node-sync pass (issue 31): the real binary, leader election on,
//! over kube-testenv and the fake cloud. A Node joins under 60 LoadBalancer Services; each
//! `UpdateLoadBalancer` takes 300 ms (the fake cloud's `latency`) and every API request 500 ms
//! (kube-testenv's injected latency), so the pass writes `UpdatedLoadBalancer` events five times
//! faster than the event writer can send them, as at 3,000 Nodes under 1,000 load balancers with
//! 20 QPS. SIGTERM comes once 20 load balancers were updated.
//!
//! The process must exit 0 within 5 s: the pass stops at the next load balancer (the updates in
//! flight end, none starts after), the Lease is released, and the events the writer could not
//! send in its short shutdown window are dropped and counted, not waited for (at 20 QPS,
//! thousands of them held the binary past its 20 s kill timeout).

mod admin_support;
mod cluster_support;

use std::time::{Duration, Instant};

use admin_support::{Ccm, scratch_dir};
use cluster_support::{
    create_lb_services, create_ready_nodes, has_ingress, read_call_log, unix_micros,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::ListParams;
use kube_testenv::TestEnv;

const SERVICES: usize = 60;
const NODES: usize = 3;
const WORKERS: usize = 10;
const SIGTERM_AFTER: usize = 20;

async fn provisioned(client: &kube::Client) -> usize {
    let list = Api::<Service>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("services");
    list.items.iter().filter(|s| has_ingress(s)).count()
}

/// Waits up to `limit` for `done`, polling every 100 ms.
async fn wait_until(
    what: &str,
    limit: Duration,
    mut done: impl AsyncFnMut() -> bool,
    log: impl Fn() -> String,
) {
    let start = Instant::now();
    while !done().await {
        assert!(
            start.elapsed() < limit,
            "{what}: not within {limit:?}\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_in_the_middle_of_a_node_sync_pass_exits_within_five_seconds() {
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let names = |n: usize| (0..n).map(|i| format!("node-{i:04}"));
    create_ready_nodes(&client, names(NODES)).await;
    create_lb_services(&client, (0..SERVICES).map(|i| format!("lb-{i:04}"))).await;

    let dir = scratch_dir("sigterm-mid-pass").expect("scratch dir");
    let calls = dir.join("calls.jsonl");
    let mut config = String::from("instances:\n");
    for name in names(NODES + 1) {
        config.push_str(&format!("  - {{name: {name}}}\n"));
    }
    config.push_str(&format!(
        "loadBalancerPool: {{cidr: 10.200.0.0/20}}\nlatency: {{UpdateLoadBalancer: 300ms}}\ncallLogFile: {}\n",
        calls.display()
    ));
    let cloud_config = dir.join("cloud-config.yaml");
    std::fs::write(&cloud_config, config).expect("cloud config");
    let mut ccm = Ccm::start(
        &env,
        &dir,
        &[
            format!("--cloud-config={}", cloud_config.display()),
            "--controllers=service".into(),
            format!("--concurrent-service-syncs={WORKERS}"),
            "--leader-elect=true".into(),
            "--leader-elect-lease-duration=4s".into(),
            "--leader-elect-renew-deadline=3s".into(),
            "--leader-elect-retry-period=500ms".into(),
        ],
    )
    .await
    .expect("the binary starts");
    let logs = || ccm_logs(&dir);
    wait_until(
        "every load balancer provisioned",
        Duration::from_secs(120),
        async || provisioned(&client).await == SERVICES,
        logs,
    )
    .await;

    // From now on the API server answers slowly; a Node joins and the pass begins.
    env.faults().set_latency(Duration::from_millis(500));
    create_ready_nodes(&client, names(NODES + 1).skip(NODES)).await;
    let updated = || {
        read_call_log(&calls)
            .into_iter()
            .filter(|c| c.method == "UpdateLoadBalancer" && c.ok)
            .count()
    };
    wait_until(
        "the pass is under way",
        Duration::from_secs(60),
        async || updated() >= SIGTERM_AFTER,
        logs,
    )
    .await;
    assert!(updated() < SERVICES, "the pass was over before SIGTERM");

    let sent_at = unix_micros();
    let sent = Instant::now();
    let status = ccm.terminate().await.expect("the binary stops");
    let took = sent.elapsed();
    env.faults().set_latency(Duration::ZERO);
    let log = logs();
    eprintln!("sigterm_mid_pass: exited {took:?} after SIGTERM, {status}");
    assert!(status.success(), "SIGTERM is a clean exit: {status}\n{log}");
    assert!(
        took <= Duration::from_secs(5),
        "exited {took:?} after SIGTERM\n{log}"
    );

    // The pass stopped at the next load balancer: what was in flight finished and was
    // accepted, at most one more per worker started as the signal arrived, and the rest were
    // left for the next leader.
    let updates: Vec<_> = read_call_log(&calls)
        .into_iter()
        .filter(|c| c.method == "UpdateLoadBalancer")
        .collect();
    assert!(
        updates.iter().all(|c| c.ok),
        "every update accepted: {updates:?}"
    );
    let started_after = updates.iter().filter(|c| c.started > sent_at).count();
    assert!(
        started_after <= WORKERS,
        "{started_after} updates started after SIGTERM"
    );
    assert!(
        updates.len() < SERVICES,
        "the pass ran on: {} updates",
        updates.len()
    );

    // The Lease was released for a standby.
    let lease = Api::<Lease>::namespaced(client.clone(), "kube-system")
        .get("cloud-controller-manager")
        .await
        .expect("lease");
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(holder.is_empty(), "still held by {holder:?}");
}

fn ccm_logs(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("ccm.log")).unwrap_or_default()
}
