//! A warm standby of the real binary taking over (issue 22's setup, on kube-testenv): two
//! processes with `--leader-elect-warm-standby`, Nodes and LoadBalancer Services; the leader is
//! killed (`kill -9`) and one more LoadBalancer Service is created at once. The standby acquires
//! the Lease and ensures that new Service first, ahead of re-verifying every inherited load
//! balancer; before acquiring it made no write but to its Lease and no cloud call.
//!
//! Each process authenticates with its own token, so kube-testenv's request log tells their
//! requests apart, and logs its cloud calls to its own file (`callLogFile`) with wall-clock
//! times, which the Lease's `acquireTime` is compared with. The default run is small (30 Nodes,
//! 20 Services); `WARM_STANDBY_NODES=3000 WARM_STANDBY_SERVICES=1000` is the scale.

mod admin_support;
mod cluster_support;

use std::path::PathBuf;
use std::time::Duration;

use admin_support::{Ccm, scratch_dir};
use cluster_support::{
    Call, create_lb_services, create_ready_nodes, has_ingress, read_call_log, unix_micros,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::ListParams;
use kube_testenv::{TestEnv, kubeconfig_yaml_with_token};

const LEASE_NS: &str = "kube-system";
const LEASE: &str = "cloud-controller-manager";

fn scale(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One process, as the user `replica-<tag>`.
struct Replica {
    dir: PathBuf,
    ccm: Option<Ccm>,
}

impl Replica {
    async fn start(env: &TestEnv, tag: &str, nodes: usize) -> Replica {
        let dir = scratch_dir(&format!("warm-standby-{tag}")).expect("scratch dir");
        let kubeconfig = dir.join("kubeconfig-replica");
        std::fs::write(
            &kubeconfig,
            kubeconfig_yaml_with_token(&env.url(), &format!("token-{tag}")),
        )
        .expect("kubeconfig");
        let mut config = String::from("instances:\n");
        for i in 0..nodes {
            config.push_str(&format!("  - {{name: node-{i:04}}}\n"));
        }
        config.push_str(&format!(
            "loadBalancerPool: {{cidr: 10.200.0.0/20}}\ncallLogFile: {}\n",
            dir.join("calls.jsonl").display()
        ));
        let cloud_config = dir.join("cloud-config.yaml");
        std::fs::write(&cloud_config, config).expect("cloud config");
        let extra = [
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--cloud-config={}", cloud_config.display()),
            "--controllers=service".into(),
            "--leader-elect=true".into(),
            "--leader-elect-warm-standby=true".into(),
            "--leader-elect-lease-duration=2s".into(),
            "--leader-elect-renew-deadline=1500ms".into(),
            "--leader-elect-retry-period=300ms".into(),
            format!("--kube-api-qps={}", scale("WARM_STANDBY_QPS", 20)),
        ];
        let ccm = Ccm::start(env, &dir, &extra).await.expect("replica starts");
        Replica {
            dir,
            ccm: Some(ccm),
        }
    }

    /// Its leader-election identity, from its log.
    async fn identity(&self) -> String {
        for _ in 0..200 {
            let logs = self.ccm.as_ref().map(Ccm::logs).unwrap_or_default();
            let found = logs
                .lines()
                .filter(|l| l.contains("attempting to acquire leader lease"))
                .find_map(|l| l.split("identity=").nth(1))
                .map(|id| id.trim().to_owned());
            if let Some(id) = found {
                return id;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no identity in the log of {}", self.dir.display());
    }

    fn calls(&self) -> Vec<Call> {
        read_call_log(&self.dir.join("calls.jsonl"))
    }
}

async fn holder(client: &kube::Client) -> Option<Lease> {
    Api::<Lease>::namespaced(client.clone(), LEASE_NS)
        .get_opt(LEASE)
        .await
        .expect("lease")
}

async fn provisioned(client: &kube::Client) -> usize {
    let list = Api::<Service>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("services");
    list.items.iter().filter(|s| has_ingress(s)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_standby_takes_over_and_serves_the_fresh_service_first() {
    let (nodes, services) = (
        scale("WARM_STANDBY_NODES", 30),
        scale("WARM_STANDBY_SERVICES", 20),
    );
    let env = TestEnv::builder()
        .static_token("token-a", "replica-a", "", &["system:masters"])
        .static_token("token-b", "replica-b", "", &["system:masters"])
        .start()
        .await
        .expect("testenv");
    let client = env.client();
    create_ready_nodes(&client, (0..nodes).map(|i| format!("node-{i:04}"))).await;
    create_lb_services(&client, (0..services).map(|i| format!("lb-{i:04}"))).await;

    // A leads (started first); B is the warm standby.
    let mut a = Replica::start(&env, "a", nodes).await;
    for _ in 0..200 {
        if holder(&client).await.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let b = Replica::start(&env, "b", nodes).await;
    for _ in 0..3000 {
        if provisioned(&client).await == services {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        provisioned(&client).await,
        services,
        "A provisioned them all"
    );
    let (a_id, b_id) = (a.identity().await, b.identity().await);
    let lease = holder(&client).await.and_then(|l| l.spec).expect("a Lease");
    assert_eq!(
        lease.holder_identity.as_deref(),
        Some(a_id.as_str()),
        "A leads"
    );
    // B's caches are synced (its informers report it) before the kill.
    for _ in 0..200 {
        if b.ccm
            .as_ref()
            .is_some_and(|c| c.logs().contains("caches are synced"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // kill -9 the leader, and at once one more LoadBalancer Service.
    a.ccm = None;
    create_lb_services(&client, ["fresh".to_string()]).await;
    let mut acquired = None;
    for _ in 0..300 {
        let spec = holder(&client).await.and_then(|l| l.spec);
        if let Some(spec) = spec
            && spec.holder_identity.as_deref() == Some(b_id.as_str())
        {
            acquired = spec.acquire_time;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let acquired = acquired.expect("B acquired the Lease").0;
    let acquired_us = (acquired.as_microsecond()) as u64;
    let mut fresh_at = None;
    for _ in 0..600 {
        fresh_at = b
            .calls()
            .into_iter()
            .find(|c| c.method == "EnsureLoadBalancer" && c.key == "default/fresh")
            .map(|c| c.started);
        if fresh_at.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fresh_at = fresh_at.expect("B ensured the fresh Service");
    // When its status shows the address (polled every 20 ms: an upper bound).
    let svc_api: Api<Service> = Api::namespaced(client.clone(), "default");
    let mut shown_us = 0;
    for _ in 0..1000 {
        if has_ingress(&svc_api.get("fresh").await.expect("fresh")) {
            shown_us = unix_micros();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(shown_us > 0, "the fresh Service never showed its address");
    let calls = b.calls();
    println!(
        "failover_warm_standby: {nodes} Nodes, {services} Services: the fresh Service's \
         EnsureLoadBalancer started {:.0} ms after B acquired the Lease; its address showed \
         within {:.0} ms",
        (fresh_at as f64 - acquired_us as f64) / 1000.0,
        (shown_us as f64 - acquired_us as f64) / 1000.0
    );

    // Before acquiring, B called no cloud.
    let early: Vec<_> = calls.iter().filter(|c| c.started < acquired_us).collect();
    assert!(
        early.is_empty(),
        "B called the cloud before leading: {early:?}"
    );
    let first_ensure = calls.iter().find(|c| c.method == "EnsureLoadBalancer");
    assert_eq!(
        first_ensure.map(|c| c.key.as_str()),
        Some("default/fresh"),
        "the fresh Service goes ahead of the inherited ones"
    );
    // B's request log up to its first successful write of the leader Lease (the acquisition:
    // a standby only reads a Lease that is held) holds no write.
    let is_write = |verb: &str| matches!(verb, "create" | "update" | "patch" | "delete");
    let requests: Vec<_> = env
        .requests()
        .into_iter()
        .filter(|r| r.user == "replica-b")
        .collect();
    let acquisition = requests
        .iter()
        .position(|r| {
            r.resource == "leases"
                && r.name.as_deref() == Some(LEASE)
                && is_write(&r.verb)
                && r.status < 300
        })
        .expect("B's acquiring write is in the log");
    let b_writes: Vec<_> = requests[..acquisition]
        .iter()
        .filter(|r| is_write(&r.verb))
        .collect();
    assert!(
        b_writes.is_empty(),
        "B wrote before it led: {:?}",
        b_writes
            .iter()
            .map(|r| format!("{} {}", r.verb, r.resource))
            .collect::<Vec<_>>()
    );
}
