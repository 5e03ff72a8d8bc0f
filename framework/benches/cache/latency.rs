//! Scenario 3: watch event → reconcile start. The parent patches ConfigMaps at a fixed rate,
//! stamping each write with its wall-clock time in an annotation; the child (one controller on
//! our framework, or one kube-runtime `Controller`) takes `now - stamp` when a reconcile starts.
//! Both processes run on the same machine, so they read the same clock.

use std::convert::Infallible;
use std::io::BufRead;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use controller_manager::controller::{Action, Controller, Request};
use controller_manager::informer::{Event, InformerScope, ObjectKey, SharedInformerFactory};
use controller_manager::workqueue::{ItemExponential, WorkQueue};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use kube_runtime::controller::Action as KubeAction;
use kube_runtime::watcher;
use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::fixtures::{LATENCY_NAMESPACE, WRITTEN_AT};
use crate::report::{Figures, percentiles_us};

/// Line the child prints once its cache is synced and it is ready to be measured.
pub const READY: &str = "READY";

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Latency samples in nanoseconds, shared by every reconcile.
struct Samples {
    taken: Mutex<Vec<u64>>,
    /// Stamps older than this were written before the run (by an earlier scenario) and are the
    /// initial list's, not a watch event's.
    since: u64,
}

impl Samples {
    fn new() -> Self {
        Self {
            taken: Mutex::new(Vec::new()),
            since: now_ns(),
        }
    }

    /// Records `now - stamp` for an object stamped during this run.
    fn record(&self, cm: &ConfigMap) {
        let now = now_ns();
        let stamp = cm
            .annotations()
            .get(WRITTEN_AT)
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(stamp) = stamp.filter(|s| *s >= self.since) {
            self.taken.lock().push(now.saturating_sub(stamp));
        }
    }
}

/// Blocks (off the runtime) until the parent writes a line on stdin.
async fn wait_for_stop() {
    let _ = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    })
    .await;
}

async fn finish(samples: &Samples) -> anyhow::Result<Figures> {
    wait_for_stop().await;
    let mut taken = std::mem::take(&mut *samples.taken.lock());
    let mut figures = Figures {
        samples: Some(taken.len()),
        latency_us: Some(percentiles_us(&mut taken)),
        ..Figures::default()
    };
    figures.settle();
    Ok(figures)
}

/// Our framework: a namespaced informer, a handler → queue, a controller with `workers` workers
/// whose service reads the object from the store.
pub async fn ours(client: Client, workers: usize) -> anyhow::Result<Figures> {
    let factory = SharedInformerFactory::new(client);
    let informer =
        factory.informer_for::<ConfigMap>(InformerScope::all().in_namespace(LATENCY_NAMESPACE));
    let store = informer.store();
    let queue: WorkQueue<ObjectKey> = WorkQueue::new("latency", ItemExponential::default());
    let q = queue.clone();
    let registration = informer.add_handler(move |e: &Event<ConfigMap>| {
        q.add(ObjectKey::from_object(e.object().as_ref()))
    });
    let samples = Arc::new(Samples::new());
    let s = Arc::clone(&samples);
    let service = tower::service_fn(move |req: Request<ObjectKey>| {
        if let Some(cm) = store.get(&req.key) {
            s.record(&cm);
        }
        std::future::ready(Ok::<_, Infallible>(Action::Done))
    });
    let shutdown = CancellationToken::new();
    factory.start(shutdown.clone());
    factory.wait_for_sync(Duration::from_secs(300)).await?;
    registration.wait_for_sync().await;
    tokio::spawn(
        Controller::new("latency", queue, service)
            .workers(workers)
            .run(shutdown.clone()),
    );
    println!("{READY}");
    let figures = finish(&samples).await;
    shutdown.cancel();
    figures
}

/// kube-runtime: one `Controller` over the same namespace, default `watcher::Config` and default
/// (unbounded) concurrency.
pub async fn kube_runtime(client: Client) -> anyhow::Result<Figures> {
    let c = kube_runtime::Controller::new(
        Api::<ConfigMap>::namespaced(client, LATENCY_NAMESPACE),
        watcher::Config::default(),
    );
    let store = c.store();
    let samples = Arc::new(Samples::new());
    let run = c.run(
        |cm: Arc<ConfigMap>, s: Arc<Samples>| async move {
            s.record(&cm);
            Ok::<_, Infallible>(KubeAction::await_change())
        },
        |_, _: &Infallible, _| KubeAction::await_change(),
        Arc::clone(&samples),
    );
    tokio::spawn(run.for_each(|_| std::future::ready(())));
    crate::shared_cache::kube_store_ready(&store).await;
    println!("{READY}");
    finish(&samples).await
}

/// What the patcher achieved, from the writer's side.
#[derive(Debug)]
pub struct Patched {
    /// Patches that succeeded.
    pub writes: usize,
    /// Writes per second actually achieved.
    pub rate: f64,
    /// Patch round-trip p50, p90, p99, max in microseconds (server write cost).
    pub round_trip_us: [f64; 4],
}

/// Patches `objects` ConfigMaps round-robin at `rate` per second for `duration`, stamping each
/// with the time just before it is sent. At most 256 patches are in flight; if the server falls
/// further behind, ticks wait and the achieved rate drops (reported).
pub async fn patch_at_rate(
    client: Client,
    objects: usize,
    rate: u32,
    duration: Duration,
) -> Patched {
    let api: Api<ConfigMap> = Api::namespaced(client, LATENCY_NAMESPACE);
    let in_flight = Arc::new(Semaphore::new(256));
    let round_trips = Arc::new(Mutex::new(Vec::new()));
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
    tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let total = (f64::from(rate) * duration.as_secs_f64()) as usize;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..total {
        tick.tick().await;
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            break;
        };
        let api = api.clone();
        let round_trips = Arc::clone(&round_trips);
        tasks.spawn(async move {
            let name = format!("cm-{:05}", n % objects);
            let patch = serde_json::json!({"metadata": {"annotations": {WRITTEN_AT: now_ns().to_string()}}});
            let sent = Instant::now();
            let ok = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.is_ok();
            round_trips.lock().push(sent.elapsed().as_nanos() as u64);
            drop(permit);
            ok
        });
    }
    let mut writes = 0;
    while let Some(done) = tasks.join_next().await {
        writes += usize::from(matches!(done, Ok(true)));
    }
    let elapsed = started.elapsed();
    let mut rt = std::mem::take(&mut *round_trips.lock());
    Patched {
        writes,
        rate: writes as f64 / elapsed.as_secs_f64(),
        round_trip_us: percentiles_us(&mut rt),
    }
}
