//! Throughput of the embedded server over real HTTP: LIST of 5,000 Nodes, and watch fan-out of
//! 10,000 ConfigMap events to 10 watchers. Run with
//! `cargo bench -p kube-testenv --bench throughput` (or, unoptimized, `cargo test --bench throughput`).
//! The watchers count raw newline-delimited frames, so the numbers are the server's, not serde's.

use std::time::Instant;

use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use kube::api::{Api, ListParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::json;

const NODES: usize = 5_000;
const EVENTS: usize = 10_000;
const WATCHERS: usize = 10;
const WRITERS: usize = 8;
const SERVICES: usize = 10_000;

async fn create_many<K, F>(api: Api<K>, total: usize, make: F)
where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    F: Fn(usize) -> K + Send + Sync + Copy + 'static,
{
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let api = api.clone();
            tokio::spawn(async move {
                for i in (w..total).step_by(WRITERS) {
                    api.create(&PostParams::default(), &make(i))
                        .await
                        .expect("create");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("writer");
    }
}

async fn list_nodes(env: &TestEnv) {
    let nodes: Api<Node> = Api::all(env.client());
    let t0 = Instant::now();
    create_many(nodes.clone(), NODES, |i| {
        serde_json::from_value(json!({"metadata": {"name": format!("node-{i:05}"), "labels": {"zone": format!("z{}", i % 3)}}})).expect("node")
    })
    .await;
    let created = t0.elapsed();
    println!(
        "create {NODES} nodes ({WRITERS} writers): {created:?} ({:.0}/s)",
        NODES as f64 / created.as_secs_f64()
    );
    let runs = 10;
    let t0 = Instant::now();
    for _ in 0..runs {
        let raw = env
            .client()
            .send(
                http::Request::get("/api/v1/nodes")
                    .body(kube::client::Body::empty())
                    .expect("request"),
            )
            .await
            .expect("list");
        let bytes = raw.into_body().collect().await.expect("body").to_bytes();
        assert!(bytes.len() > NODES * 100);
    }
    println!(
        "LIST {NODES} nodes (raw bytes): {:?} per list",
        t0.elapsed() / runs
    );
    let t0 = Instant::now();
    let typed = nodes
        .list(&ListParams::default())
        .await
        .expect("typed list");
    assert_eq!(typed.items.len(), NODES);
    println!(
        "LIST {NODES} nodes (kube typed, client decode included): {:?}",
        t0.elapsed()
    );
}

/// Opens `WATCHERS` raw watches from `rv`; each task resolves when it has counted `EVENTS` frames.
async fn open_watchers(env: &TestEnv, rv: u64) -> Vec<tokio::task::JoinHandle<(usize, Instant)>> {
    let mut counters = Vec::new();
    for _ in 0..WATCHERS {
        let req = http::Request::get(format!(
            "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"
        ))
        .body(kube::client::Body::empty())
        .expect("request");
        let resp = env.client().send(req).await.expect("watch");
        let mut body = resp.into_body().into_data_stream();
        counters.push(tokio::spawn(async move {
            let mut lines = 0usize;
            while lines < EVENTS {
                match body.next().await {
                    Some(Ok(chunk)) => lines += chunk.iter().filter(|b| **b == b'\n').count(),
                    _ => break,
                }
            }
            (lines, Instant::now())
        }));
    }
    counters
}

async fn fan_out(env: &TestEnv) {
    let rv = env.resource_version();
    let counters = open_watchers(env, rv).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let t0 = Instant::now();
    create_many(cms, EVENTS, |i| {
        serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}, "data": {"k": "v"}}))
            .expect("cm")
    })
    .await;
    let written = t0.elapsed();
    let mut last = t0;
    for c in counters {
        let (lines, at) = c.await.expect("watcher");
        assert_eq!(lines, EVENTS, "every watcher saw every event");
        last = last.max(at);
    }
    let total = last - t0;
    println!(
        "write {EVENTS} events ({WRITERS} writers): {written:?} ({:.0}/s)",
        EVENTS as f64 / written.as_secs_f64()
    );
    println!(
        "fan-out to {WATCHERS} watchers: all delivered after {total:?} ({:.0} events/s per watcher, {:.0} deliveries/s total)",
        EVENTS as f64 / total.as_secs_f64(),
        (EVENTS * WATCHERS) as f64 / total.as_secs_f64()
    );
    // Delivery alone, without the write path: replay the same events from history.
    let t0 = Instant::now();
    for c in open_watchers(env, rv).await {
        assert_eq!(c.await.expect("watcher").0, EVENTS);
    }
    let replay = t0.elapsed();
    println!(
        "replay {EVENTS} events from history to {WATCHERS} watchers: {replay:?} ({:.0} deliveries/s total)",
        (EVENTS * WATCHERS) as f64 / replay.as_secs_f64()
    );
}

/// Service creates allocate a clusterIP each; the rate of the last thousand shows whether
/// allocation slows down as Services accumulate.
async fn create_services(env: &TestEnv) {
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let make = |i: usize| -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": format!("svc-{i:05}")},
            "spec": {"ports": [{"port": 80}]}
        }))
        .expect("service")
    };
    let t0 = Instant::now();
    create_many(services.clone(), SERVICES - 1_000, make).await;
    let t1 = Instant::now();
    create_many(services, 1_000, move |i| make(SERVICES - 1_000 + i)).await;
    let (all, last) = (t0.elapsed(), t1.elapsed());
    println!(
        "create {SERVICES} ClusterIP services ({WRITERS} writers): {all:?} ({:.0}/s); last 1000: {last:?} ({:.0}/s)",
        SERVICES as f64 / all.as_secs_f64(),
        1_000.0 / last.as_secs_f64()
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let env = TestEnv::builder()
            .history_window(50_000)
            .start()
            .await
            .expect("start");
        let only_services = std::env::args().any(|a| a == "services");
        if !only_services {
            list_nodes(&env).await;
            fan_out(&env).await;
        }
        create_services(&env).await;
    });
}
