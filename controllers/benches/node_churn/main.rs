//! Node churn under load balancers (`docs/benchmarks.md` §5): 1,000 Nodes join a cluster with
//! 300 LoadBalancer Services, on kube-testenv with the fake cloud at 100 ms per load-balancer call
//! and an API quota of 20 load-balancer calls/s (answering `Retry { after }`); or, with
//! `--join-seconds 300 --lb-qps 0`, Nodes join at the pace a real server's client QPS allows,
//! with no quota. The stock cloud-node and service-lb controllers run in one `Manager`, side by
//! side in one run: `ours` (the coalesced node sync, `--node-sync-batch-period=2s` doubling up to
//! `--node-sync-max-batch-period=1m` while the set keeps changing, and
//! `--cloud-api-pause-on-retry`, the defaults), `ours-flat` (the period not doubling: one answer
//! every 2 s while the burst goes on), `ours-no-pause` (the defaults with
//! `--cloud-api-pause-on-retry=false`), `ours-0s` (the defaults but answering every node change
//! at once) and `upstream` (upstream's node sync, a full pass per changed Node, in our own code:
//! [`upstream`]).
//!
//! Per mode: a fresh kube-testenv and fake cloud; 3 initialized Nodes; the 300 Services created and
//! provisioned; then the clock starts, 1,000 kubelet-shaped (uninitialized) Nodes are created, and
//! the run ends when every Node is initialized and every load balancer holds every Node. Figures:
//! load-balancer calls (accepted and refused by the quota), seconds to that point, API writes by
//! resource, events lost (successful cloud calls with no matching Event count), and the CPU
//! seconds of the manager's own runtime threads (kube-testenv runs on other threads), also as a
//! share of upstream's when it ran, and accepted updates per load balancer (max and mean).
//!
//! `cargo bench -p cloud-controllers --bench node_churn [-- --nodes 1000 --services 300 --modes ours,ours-no-pause,ours-0s,upstream --join-per-second 50 --lb-qps 20 --lb-latency-ms 100 --extra=--cloud-api-qps=20]`
//! `cargo bench -p cloud-controllers --bench node_churn -- --nodes 3000 --services 1000 --join-seconds 300 --lb-qps 0 --modes ours,upstream`

mod upstream;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use cloud_controllers::cloud::{CloudProvider, InstrumentedCloud};
use cloud_controllers::options::CloudOptions;
use cloud_controllers::{CloudContext, cloud_initializers};
use controller_manager::manager::{Manager, ManagerConfig};
use fake_cloud::{CallOutcome, FakeCloud, FakeInstance, Method, RateLimit};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::Api;
use kube::api::{ListParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const LB_METHODS: [Method; 4] = [
    Method::GetLoadBalancer,
    Method::EnsureLoadBalancer,
    Method::UpdateLoadBalancer,
    Method::EnsureLoadBalancerDeleted,
];
const BASE_NODES: usize = 3;
const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    #[arg(long, default_value_t = 300)]
    services: usize,
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ours,ours-no-pause,ours-0s,upstream"
    )]
    modes: Vec<String>,
    /// Nodes registering per second (a scale-up's shape: 50/s is 1,000 Nodes in 20 s); 0 creates
    /// them as fast as the API server takes them.
    #[arg(long, default_value_t = 50.0)]
    join_per_second: f64,
    /// Spreads the join over this many seconds instead (`--nodes` / seconds per second): the
    /// pace at which a real server's client QPS lets Nodes become eligible, e.g. 300 for 3,000
    /// Nodes at two writes per Node and 20 QPS.
    #[arg(long)]
    join_seconds: Option<f64>,
    /// How long each load-balancer call takes in the fake cloud, in milliseconds.
    #[arg(long, default_value_t = 100)]
    lb_latency_ms: u64,
    /// The cloud's quota on load-balancer calls per second (burst the same); 0: no quota, to
    /// see the node sync's own pace.
    #[arg(long, default_value_t = 20.0)]
    lb_qps: f64,
    /// Extra manager flags for both modes, e.g. the cloud call budget:
    /// `--extra=--cloud-api-pause-on-retry`.
    #[arg(long, allow_hyphen_values = true)]
    extra: Vec<String>,
    /// Ignored: cargo bench passes it.
    #[arg(long)]
    bench: bool,
}

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    cloud: CloudOptions,
}

/// One mode's figures.
#[derive(Debug, Default)]
struct Row {
    mode: String,
    update_ok: usize,
    update_refused: usize,
    other_lb_calls: usize,
    converged_s: f64,
    nodes_initialized_s: f64,
    /// Until every load balancer holds a joined Node (each update carries the whole node set, so
    /// the first Node to join is in it): the lag a long scale-up imposes on its first Node.
    first_in_every_lb_s: f64,
    api_writes: BTreeMap<String, usize>,
    events_expected: i64,
    events_counted: i64,
    ensured_expected: i64,
    ensured_counted: i64,
    cpu_s: f64,
    /// Requests answered 409 Conflict / 422 (a failed patch `test`) during the phase.
    conflicts: usize,
    test_failed: usize,
    /// Accepted `UpdateLoadBalancer` calls per load balancer during the phase.
    updates_per_lb_max: usize,
    updates_per_lb_mean: f64,
}

fn node_name(i: usize) -> String {
    format!("node-{i:04}")
}

fn cloud(nodes: usize, lb_qps: f64, latency: Duration) -> anyhow::Result<FakeCloud> {
    let mut b = FakeCloud::builder().lb_pool_cidr("10.200.0.0/16");
    if lb_qps > 0.0 {
        b = b.rate_limit(RateLimit::new(lb_qps, lb_qps.ceil() as u32).methods(LB_METHODS));
    }
    for m in LB_METHODS {
        b = b.latency(m, latency);
    }
    for i in 0..nodes {
        let name = node_name(i);
        b = b.instance(
            FakeInstance::new(name.clone())
                .provider_id(format!("fake://{name}"))
                .zone(format!("zone-{}", i % 3), "region-1")
                .internal_ip(format!("10.0.{}.{}", i / 250, 1 + i % 250)),
        );
    }
    let cloud = b.build()?;
    // Every call is counted by outcome: a storm can make far more than the default log keeps.
    cloud.set_call_log_capacity(1_000_000);
    Ok(cloud)
}

fn kubelet_node(name: &str, initialized: bool) -> anyhow::Result<Node> {
    let mut node = json!({
        "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
        "spec": { "taints": [{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] }
    });
    if initialized {
        node["spec"] = json!({ "providerID": format!("fake://{name}") });
    }
    Ok(serde_json::from_value(node)?)
}

fn lb_service(name: &str) -> anyhow::Result<Service> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": "default" },
        "spec": { "type": "LoadBalancer", "selector": { "app": name },
                  "ports": [{ "name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP" }] }
    }))?)
}

/// utime + stime of this process's threads whose name starts with `prefix`, in seconds.
fn thread_cpu(prefix: &str) -> f64 {
    let mut ticks = 0u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        for i in [11, 12] {
            ticks += fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    ticks as f64 / 100.0
}

async fn create_all<T, F>(count: usize, make: F) -> anyhow::Result<()>
where
    F: Fn(usize) -> futures::future::BoxFuture<'static, Result<T, kube::Error>>,
{
    let results: Vec<Result<T, kube::Error>> = futures::stream::iter(0..count)
        .map(make)
        .buffer_unordered(16)
        .collect()
        .await;
    for r in results {
        r?;
    }
    Ok(())
}

/// Waits (polling every 100 ms, up to `limit`) until `done` holds.
async fn wait_for(
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > limit {
            bail!("{what}: not reached within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The shape of one run, the same for every mode.
struct Shape {
    nodes: usize,
    services: usize,
    /// Nodes created per second; 0: as fast as the API server takes them.
    rate: f64,
    lb_qps: f64,
    lb_latency: Duration,
}

async fn run(mode: &str, shape: &Shape, extra: &[String]) -> anyhow::Result<Row> {
    let &Shape {
        nodes,
        services,
        rate,
        lb_qps,
        lb_latency,
    } = shape;
    let (period, max_period, pause, initializers) = match mode {
        "ours" => ("2s", "1m", true, cloud_initializers()),
        "ours-flat" => ("2s", "2s", true, cloud_initializers()),
        "ours-no-pause" => ("2s", "1m", false, cloud_initializers()),
        "ours-0s" => ("0s", "1m", true, cloud_initializers()),
        "upstream" => (
            "0s",
            "0s",
            false,
            cloud_initializers()
                .without(cloud_controllers::names::service_lb::CONTROLLER_NAME)
                .with(upstream::initializer()),
        ),
        other => {
            bail!("unknown mode {other:?}: use ours, ours-flat, ours-no-pause, ours-0s or upstream")
        }
    };
    let env = TestEnv::start().await?;
    let client = env.client();
    let cloud = cloud(BASE_NODES + nodes, lb_qps, lb_latency)?;
    let node_api: Api<Node> = Api::all(client.clone());
    for i in 0..BASE_NODES {
        node_api
            .create(&PostParams::default(), &kubelet_node(&node_name(i), true)?)
            .await?;
    }
    let svc_api: Api<Service> = Api::namespaced(client.clone(), "default");
    let keys: Vec<String> = (0..services)
        .map(|i| format!("default/lb-{i:03}"))
        .collect();
    {
        let api = svc_api.clone();
        create_all(services, move |i| {
            let api = api.clone();
            Box::pin(async move {
                let svc = lb_service(&format!("lb-{i:03}")).expect("valid service");
                api.create(&PostParams::default(), &svc).await
            })
        })
        .await?;
    }

    // The manager on its own runtime, so its CPU can be told from kube-testenv's.
    let ccm = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("ccm")
        .enable_all()
        .build()?;
    let mut config = ManagerConfig::new("cloud-controller-manager");
    config.controllers = vec!["cloud-node".into(), "service".into()];
    config.cache_sync_timeout = Duration::from_secs(60);
    config.graceful_shutdown_timeout = Duration::from_secs(2);
    let mut argv: Vec<String> = [
        "bench",
        "--cloud-provider=fake",
        "--concurrent-service-syncs=10",
        "--concurrent-node-syncs=10",
        "--configure-cloud-routes=false",
    ]
    .map(String::from)
    .into();
    argv.push(format!("--node-sync-batch-period={period}"));
    argv.push(format!("--node-sync-max-batch-period={max_period}"));
    argv.push(format!("--cloud-api-pause-on-retry={pause}"));
    argv.extend(extra.iter().cloned());
    let opts = Flags::try_parse_from(argv)?.cloud;
    let stop = CancellationToken::new();
    let kube_config = env.config();
    // As the binary wraps it: spans, metrics and the --cloud-api-* budget (off unless given).
    let provider: Arc<dyn CloudProvider> = Arc::new(
        InstrumentedCloud::new(Arc::new(cloud.clone()), None).with_budget(&opts.budget_options()),
    );
    let manager = ccm.spawn({
        let stop = stop.clone();
        async move {
            let client = kube::Client::try_from(kube_config)?;
            Manager::new(config, client, CloudContext::new(provider, opts))
                .with_initializers(initializers)
                .run(stop)
                .await?;
            anyhow::Ok(())
        }
    });

    let total = BASE_NODES + nodes;
    // Counts, not copies of 300 × 1,000 backend names per poll.
    let holds = |n: usize| {
        let counts = cloud.load_balancer_node_counts();
        keys.iter().all(|k| counts.get(k) == Some(&n))
    };
    wait_for(
        "the load balancers provisioned",
        Duration::from_secs(300),
        || holds(BASE_NODES),
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ensured_expected = cloud
        .calls_to(Method::EnsureLoadBalancer)
        .iter()
        .filter(|c| c.outcome.is_ok())
        .count() as i64;
    cloud.clear_calls();
    env.clear_requests();
    let events_before = lb_event_counts(&client).await?;
    let cpu0 = thread_cpu("ccm");
    let t0 = Instant::now();

    // The join runs beside the measurements below: the first Node's lag is measured while the
    // burst goes on, not after it.
    let join_api = node_api.clone();
    let joining = tokio::spawn(async move {
        if rate > 0.0 {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            for i in 0..nodes {
                tick.tick().await;
                let node = kubelet_node(&node_name(BASE_NODES + i), false)?;
                let api = join_api.clone();
                tokio::spawn(async move { api.create(&PostParams::default(), &node).await });
            }
        } else {
            create_all(nodes, move |i| {
                let api = join_api.clone();
                Box::pin(async move {
                    let node = kubelet_node(&node_name(BASE_NODES + i), false).expect("valid node");
                    api.create(&PostParams::default(), &node).await
                })
            })
            .await?;
        }
        anyhow::Ok(())
    });
    let mut nodes_initialized_s = 0.0;
    let mut first_in_every_lb_s = 0.0;
    let join = if rate > 0.0 {
        Duration::from_secs_f64(nodes as f64 / rate)
    } else {
        Duration::ZERO
    };
    let limit = join + Duration::from_secs(600);
    loop {
        if nodes_initialized_s == 0.0 && joining.is_finished() {
            let list = node_api.list(&ListParams::default()).await?;
            let created = list.items.len() >= BASE_NODES + nodes;
            let done = list.items.iter().all(|n| {
                n.spec.as_ref().is_some_and(|s| {
                    s.provider_id.is_some()
                        && s.taints
                            .as_ref()
                            .is_none_or(|t| t.iter().all(|t| t.key != UNINITIALIZED))
                })
            });
            if done && created {
                nodes_initialized_s = t0.elapsed().as_secs_f64();
            }
        }
        if first_in_every_lb_s == 0.0 {
            let counts = cloud.load_balancer_node_counts();
            if keys
                .iter()
                .all(|k| counts.get(k).is_some_and(|&n| n > BASE_NODES))
            {
                first_in_every_lb_s = t0.elapsed().as_secs_f64();
            }
        }
        if nodes_initialized_s > 0.0 && holds(total) {
            break;
        }
        if t0.elapsed() > limit {
            bail!("{mode}: load balancers did not converge within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let converged_s = t0.elapsed().as_secs_f64();
    let cpu_s = thread_cpu("ccm") - cpu0;
    joining.await.context("the join task")??;
    // Let the recorder write what is still queued before counting events.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let calls = cloud.calls();
    let mut row = Row {
        mode: mode.into(),
        converged_s,
        nodes_initialized_s,
        first_in_every_lb_s,
        cpu_s,
        ..Row::default()
    };
    // Per load balancer: when its first accepted update came, and how often it was refused
    // before that (the tail of "a joined Node in every LB").
    let start = tokio::time::Instant::from_std(t0);
    let mut first_ok: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    let mut refused_before: BTreeMap<&str, usize> = BTreeMap::new();
    for c in calls
        .iter()
        .filter(|c| c.method == Method::UpdateLoadBalancer)
    {
        if first_ok.contains_key(c.key.as_str()) {
            continue;
        }
        if c.outcome.is_ok() {
            let at = c.started.saturating_duration_since(start).as_secs_f64();
            let refusals = refused_before.get(c.key.as_str()).copied().unwrap_or(0);
            first_ok.insert(&c.key, (at, refusals));
        } else {
            *refused_before.entry(&c.key).or_default() += 1;
        }
    }
    let mut firsts: Vec<(f64, usize)> = first_ok.values().copied().collect();
    firsts.sort_by(|a, b| a.0.total_cmp(&b.0));
    if let (Some(first), Some(last)) = (firsts.first(), firsts.last()) {
        let at = |q: f64| firsts[((firsts.len() - 1) as f64 * q) as usize].0;
        let most = firsts.iter().map(|f| f.1).max().unwrap_or(0);
        eprintln!(
            "{mode}: first accepted update per LB at {:.1} / {:.1} / {:.1} / {:.1} s (first, p50, p90, last); \
             the last one was refused {} times before; at most {most} refusals before a first update",
            first.0,
            at(0.5),
            at(0.9),
            last.0,
            last.1
        );
    }
    let mut expected_events = 0i64;
    let mut per_lb: BTreeMap<&str, usize> = keys.iter().map(|k| (k.as_str(), 0)).collect();
    for c in &calls {
        match (c.method, &c.outcome) {
            (Method::UpdateLoadBalancer, CallOutcome::Ok) => {
                row.update_ok += 1;
                expected_events += 1;
                if let Some(n) = per_lb.get_mut(c.key.as_str()) {
                    *n += 1;
                }
            }
            (Method::UpdateLoadBalancer, CallOutcome::Err(_)) => row.update_refused += 1,
            (m, _) if LB_METHODS.contains(&m) => row.other_lb_calls += 1,
            _ => {}
        }
    }
    row.updates_per_lb_max = per_lb.values().copied().max().unwrap_or(0);
    row.updates_per_lb_mean = per_lb.values().sum::<usize>() as f64 / per_lb.len().max(1) as f64;
    for r in env.requests() {
        match r.status {
            409 => row.conflicts += 1,
            422 => row.test_failed += 1,
            _ => {}
        }
        if matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete") {
            let resource = match r.subresource {
                Some(sub) => format!("{}/{sub}", r.resource),
                None => r.resource,
            };
            *row.api_writes.entry(resource).or_default() += 1;
        }
    }
    let events_after = lb_event_counts(&client).await?;
    row.events_expected = expected_events;
    row.ensured_expected = ensured_expected;
    row.ensured_counted = events_before
        .get("EnsuredLoadBalancer")
        .copied()
        .unwrap_or(0);
    row.events_counted = events_after
        .get("UpdatedLoadBalancer")
        .copied()
        .unwrap_or(0)
        - events_before
            .get("UpdatedLoadBalancer")
            .copied()
            .unwrap_or(0);

    stop.cancel();
    manager.await.context("manager task")??;
    ccm.shutdown_background();
    Ok(row)
}

/// Sum of `count` of the service controller's events, by reason.
async fn lb_event_counts(client: &kube::Client) -> anyhow::Result<BTreeMap<String, i64>> {
    let events = Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await?;
    let mut by_reason = BTreeMap::new();
    for e in events.items {
        if e.involved_object.kind.as_deref() == Some("Service") {
            *by_reason.entry(e.reason.unwrap_or_default()).or_default() +=
                i64::from(e.count.unwrap_or(1));
        }
    }
    Ok(by_reason)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("testenv")
        .enable_all()
        .build()?;
    let shape = Shape {
        nodes: args.nodes,
        services: args.services,
        rate: match args.join_seconds {
            Some(secs) if secs > 0.0 => args.nodes as f64 / secs,
            Some(_) => bail!("--join-seconds must be greater than 0"),
            None => args.join_per_second,
        },
        lb_qps: args.lb_qps,
        lb_latency: Duration::from_millis(args.lb_latency_ms),
    };
    eprintln!(
        "node_churn: {} Nodes joining at {:.1}/s under {} load balancers; cloud quota {} calls/s, {} ms a call",
        shape.nodes, shape.rate, shape.services, shape.lb_qps, args.lb_latency_ms
    );
    let mut rows = Vec::new();
    for mode in &args.modes {
        eprintln!("node_churn: {mode} ...");
        let row = rt.block_on(run(mode, &shape, &args.extra))?;
        eprintln!("{row:?}");
        rows.push(row);
    }
    let upstream_cpu = rows.iter().find(|r| r.mode == "upstream").map(|r| r.cpu_s);
    println!(
        "| algorithm | UpdateLoadBalancer ok | per LB max / mean | refused (429) | other LB calls | nodes initialized s | a joined Node in every LB s | every LB holds every node s | API writes | 409 / 422 | Updated events written / expected | Ensured (provisioning) written / expected | CPU s | CPU / upstream's |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let ratio = upstream_cpu
            .filter(|u| *u > 0.0)
            .map_or("-".to_string(), |u| format!("{:.3}", r.cpu_s / u));
        let writes: usize = r.api_writes.values().sum();
        let detail: Vec<String> = r
            .api_writes
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        println!(
            "| {} | {} | {} / {:.1} | {} | {} | {:.1} | {:.1} | {:.1} | {} ({}) | {} / {} | {} / {} | {} / {} | {:.2} | {ratio} |",
            r.mode,
            r.update_ok,
            r.updates_per_lb_max,
            r.updates_per_lb_mean,
            r.update_refused,
            r.other_lb_calls,
            r.nodes_initialized_s,
            r.first_in_every_lb_s,
            r.converged_s,
            writes,
            detail.join(", "),
            r.conflicts,
            r.test_failed,
            r.events_counted,
            r.events_expected,
            r.ensured_counted,
            r.ensured_expected,
            r.cpu_s
        );
    }
    Ok(())
}
