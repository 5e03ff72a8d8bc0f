//! Convergence under API faults (issue 9): the stock controllers in one manager bring a fleet of
//! Nodes and LoadBalancer Services to the desired state while kube-testenv cuts every watch every
//! 1–3 s, compacts its history (410 Gone on re-watch, so informers re-list) and fails 10 % of all
//! requests with 500 or 429 — and the same scenario without faults, to compare the time taken.
//!
//! Checked at the end: every Node initialized and none deleted; every live Service has its load
//! balancer and ingress; every deleted Service is gone (cleanup finalizer removed) with its load
//! balancer deleted; no load balancer without a Service, and never two for one Service.
//!
//! Sizes: the 200 Nodes and 100 Services, of which 20 are deleted once provisioned.

mod reliability_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_cloud::Method;
use kube_testenv::TestEnv;
use rand::Rng;
use reliability_support::*;

const NODES: usize = 200;
const SERVICES: usize = 100;
const DELETED: usize = 20;

/// Cuts watches every 1–3 s (the first cut within 0.5–1 s, so that even a fast run sees one),
/// expires history on the first cut and every other one after it, and flips the 10 % failure
/// status between 500 and 429, until `stop`.
async fn chaos(env: TestEnv, stop: tokio_util::sync::CancellationToken) -> usize {
    let faults = env.faults();
    let mut cuts = 0;
    loop {
        let range = if cuts == 0 { 500..=1000 } else { 1000..=3000 };
        let wait = Duration::from_millis(rand::rng().random_range(range));
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(wait) => {}
        }
        cuts += 1;
        faults.fail_ratio(0.10, if cuts % 2 == 0 { 500 } else { 429 });
        if cuts % 2 == 1 {
            faults.expire_history();
        }
        faults.close_watches();
    }
    faults.fail_ratio(0.0, 500);
    cuts
}

/// What one run of the scenario saw: how long it took, and the evidence that the faults it was
/// meant to survive really happened.
struct Run {
    took: Duration,
    /// Informer lists (streaming, or LIST from `resourceVersion=0`): one per informer when
    /// nothing goes wrong, more when a cut watch could not resume and the informer re-listed.
    informer_lists: usize,
    /// Requests answered with an injected 500 or 429.
    failed: usize,
    /// Times the chaos task cut every watch.
    cuts: usize,
}

/// Runs the whole scenario to convergence.
async fn scenario(with_faults: bool) -> Run {
    init_tracing();
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let cloud = fleet_cloud(NODES);
    let opts = options(&[
        "--concurrent-service-syncs=4",
        "--concurrent-node-syncs=4",
        "--node-monitor-period=1s",
        "--configure-cloud-routes=false",
    ]);
    let (stop, mut manager) = start_manager(
        client.clone(),
        Arc::new(cloud.clone()),
        opts,
        manager_config(if with_faults { "faulty" } else { "clean" }),
    );

    let chaos_stop = tokio_util::sync::CancellationToken::new();
    let chaos_task = if with_faults {
        env.faults().fail_ratio(0.10, 500);
        Some(tokio::spawn(chaos(env.clone(), chaos_stop.clone())))
    } else {
        None
    };

    let started = Instant::now();
    let work = async {
        create_nodes(&client, (0..NODES).map(node_name)).await;
        create_services(&client, (0..SERVICES).map(service_name)).await;

        // Delete some Services once their load balancers exist, so deletion has cloud work to do.
        let doomed: Vec<String> = (0..DELETED).map(|i| service_name(i * 5)).collect();
        for name in &doomed {
            let key = format!("default/{name}");
            tokio::time::timeout(Duration::from_secs(120), async {
                while cloud.lb_for(&key).is_none() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("{key} never got a load balancer"));
            delete_service(&client, name).await;
        }

        let live: BTreeSet<String> = (0..SERVICES)
            .map(service_name)
            .filter(|s| !doomed.contains(s))
            .collect();
        wait_converged(&client, &cloud, NODES, &live, Duration::from_secs(240)).await;
        doomed
    };
    let doomed = tokio::select! {
        r = &mut manager => panic!("manager stopped before convergence: {r:?}"),
        doomed = work => doomed,
    };
    let took = started.elapsed();

    chaos_stop.cancel();
    let cuts = match chaos_task {
        Some(t) => t.await.expect("chaos task"),
        None => 0,
    };
    stop.cancel();
    manager
        .await
        .expect("manager task")
        .expect("manager stops cleanly");

    // Nothing deleted wrongly along the way: no Node was ever deleted, and the only load
    // balancers deleted belong to deleted Services.
    let requests = env.requests();
    let node_deletes: Vec<_> = requests
        .iter()
        .filter(|r| r.resource == "nodes" && r.verb == "delete")
        .collect();
    assert!(node_deletes.is_empty(), "nodes deleted: {node_deletes:?}");
    let doomed_keys: BTreeSet<String> = doomed.iter().map(|s| format!("default/{s}")).collect();
    for call in cloud.calls_to(Method::EnsureLoadBalancerDeleted) {
        assert!(
            doomed_keys.contains(&call.key),
            "load balancer of live Service deleted: {call}"
        );
    }
    // LISTs (the informers' relists after 410 plus this test's snapshots) and WATCH
    // (re)connections, to show the informers really were cut off and recovered.
    let lists = requests.iter().filter(|r| r.verb == "list").count();
    let watches = requests.iter().filter(|r| r.verb == "watch").count();
    // An informer (re)lists with a streaming list (a WATCH with sendInitialEvents), or with a
    // LIST from resourceVersion 0 on a server that does not serve them.
    let informer_lists = requests
        .iter()
        .filter(|r| {
            (r.verb == "list" && r.query.contains("resourceVersion=0"))
                || (r.verb == "watch" && r.query.contains("sendInitialEvents=true"))
        })
        .count();
    println!(
        "reliability_convergence: faults={with_faults} lists={lists} informer_lists={informer_lists} watches={watches}"
    );
    let failed: usize = requests
        .iter()
        .filter(|r| r.status >= 500 || r.status == 429)
        .count();
    let mut by_method = std::collections::BTreeMap::<&str, usize>::new();
    for call in cloud.calls() {
        *by_method.entry(call.method.as_str()).or_default() += 1;
    }
    println!("reliability_convergence: faults={with_faults} cloud calls by method: {by_method:?}");
    println!(
        "reliability_convergence: faults={with_faults} nodes={NODES} services={SERVICES} deleted={DELETED} \
         converged_in={took:?} api_requests={} failed_injected={failed} watch_cuts={cuts} cloud_calls={}",
        requests.len(),
        cloud.calls().len()
    );
    Run {
        took,
        informer_lists,
        failed,
        cuts,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_under_api_faults_and_compares_with_fault_free_run() {
    let clean = scenario(false).await;
    let faulty = scenario(true).await;
    println!(
        "reliability_convergence: fault-free {:?}, under faults {:?} ({:.1}x)",
        clean.took,
        faulty.took,
        faulty.took.as_secs_f64() / clean.took.as_secs_f64().max(0.001)
    );
    // The fault-free run saw no faults, so it is the baseline for "the informers re-listed".
    assert_eq!(clean.failed, 0, "the fault-free run saw injected failures");
    assert_eq!(clean.cuts, 0);
    // The faulty run converged *through* faults: requests failed, watches were cut, and at
    // least one informer had to re-list after its history expired.
    assert!(
        faulty.failed > 0,
        "no request failed: faults were not injected"
    );
    assert!(faulty.cuts > 0, "no watch was cut before convergence");
    assert!(
        faulty.informer_lists > clean.informer_lists,
        "no informer re-listed under faults ({} informer LISTs, {} without faults)",
        faulty.informer_lists,
        clean.informer_lists
    );
}
