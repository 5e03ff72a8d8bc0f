//! The manager flushes every event recorder before `run` returns: events recorded just before
//! shutdown reach the API server, and what cannot be written within the flush deadline (the
//! event flush timeout, within the graceful-shutdown deadline) is counted in
//! `events_dropped_total`, so a writer far behind never holds the process long. The manager runs on a runtime of its own that
//! is dropped as soon as `run` returns, as a process exits: a recorder's background writer dies
//! with it, so only what `run` waited for is on the server.

use std::sync::Arc;
use std::time::Duration;

use controller_manager::events::EventType;
use controller_manager::manager::{
    InitContext, InitOutcome, Initializer, Initializers, Manager, ManagerConfig,
};
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::Api;
use kube::api::ListParams;
use kube_testenv::TestEnv;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Distinct events the controller records at start, then it idles until shutdown.
const EVENTS: usize = 100;
const COMPONENT: &str = "noisy-controller";

fn noisy(recorded: Arc<Notify>) -> Initializer<()> {
    Initializer::new("noisy", move |ctx: InitContext<()>| {
        let recorded = recorded.clone();
        async move {
            let recorder = ctx.event_recorder(&ctx.client, COMPONENT);
            for i in 0..EVENTS {
                let node = ObjectReference {
                    kind: Some("Node".into()),
                    name: Some(format!("node-{i}")),
                    ..ObjectReference::default()
                };
                recorder.event(&node, EventType::Normal, "Recorded", format!("event {i}"));
            }
            recorded.notify_one();
            let stop = ctx.shutdown.clone();
            Ok(InitOutcome::Started(Box::pin(async move {
                stop.cancelled().await
            })))
        }
    })
}

/// Runs a manager with the noisy controller on its own runtime, cancels it as soon as the
/// events are recorded, drops the runtime once `run` returned, and gives back `/metrics` and
/// how long `run` took after the cancel.
async fn record_then_stop(
    env: &TestEnv,
    graceful: Duration,
    flush: Duration,
) -> (String, Duration) {
    let config = env.config();
    let recorded = Arc::new(Notify::new());
    let stop = CancellationToken::new();
    let (notify, token) = (recorded.clone(), stop.clone());
    let manager = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let metrics = runtime.block_on(async move {
            let client = kube::Client::try_from(config).unwrap();
            let mut config = ManagerConfig::new("events-flush");
            config.graceful_shutdown_timeout = graceful;
            config.event_flush_timeout = flush;
            let manager = Manager::new(config, client, ())
                .with_initializers(Initializers::new().with(noisy(notify)));
            let registry = manager.registry();
            manager.run(token).await.unwrap();
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry.lock()).unwrap();
            text
        });
        drop(runtime);
        metrics
    });
    recorded.notified().await;
    stop.cancel();
    let cancelled = std::time::Instant::now();
    let metrics = tokio::task::spawn_blocking(move || manager.join().unwrap())
        .await
        .unwrap();
    (metrics, cancelled.elapsed())
}

async fn written(env: &TestEnv) -> usize {
    let events = Api::<Event>::namespaced(env.client(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    events
        .items
        .iter()
        .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(COMPONENT))
        .count()
}

fn dropped(metrics: &str) -> u64 {
    let series = format!("events_dropped_total{{component=\"{COMPONENT}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_recorded_just_before_shutdown_are_written_before_run_returns() {
    let env = TestEnv::start().await.unwrap();
    let (metrics, _) =
        record_then_stop(&env, Duration::from_secs(20), Duration::from_secs(20)).await;
    assert_eq!(written(&env).await, EVENTS);
    assert_eq!(dropped(&metrics), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_not_written_by_the_shutdown_deadline_are_counted_as_dropped() {
    let env = TestEnv::start().await.unwrap();
    // Every write takes longer than the whole shutdown deadline.
    env.faults().set_latency(Duration::from_secs(2));
    let (metrics, _) =
        record_then_stop(&env, Duration::from_millis(200), Duration::from_secs(20)).await;
    env.faults().set_latency(Duration::ZERO);
    // The one being written at the deadline (if the writer had started on it) is not counted:
    // the server may still finish it.
    let lost = dropped(&metrics);
    assert!(
        (EVENTS as u64 - 1..=EVENTS as u64).contains(&lost),
        "dropped {lost} of {EVENTS}"
    );
    assert!(written(&env).await <= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_flush_timeout_bounds_the_wait_within_a_long_graceful_timeout() {
    let env = TestEnv::start().await.unwrap();
    // 100 events at 300 ms each: 30 s to write them all.
    env.faults().set_latency(Duration::from_millis(300));
    let (metrics, took) =
        record_then_stop(&env, Duration::from_secs(30), Duration::from_secs(1)).await;
    env.faults().set_latency(Duration::ZERO);
    // The flush second, plus the end of the write in flight; generous for a loaded machine.
    assert!(
        took < Duration::from_secs(10),
        "run returned {took:?} after the cancel"
    );
    let lost = dropped(&metrics);
    let written = written(&env).await as u64;
    assert!(lost >= EVENTS as u64 - 10, "dropped {lost} of {EVENTS}");
    assert!(
        lost + written >= EVENTS as u64 - 1,
        "{written} written, {lost} dropped"
    );
}
