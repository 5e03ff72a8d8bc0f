//! Queue behaviour under tokio's paused clock, rate-limiter sequences, metrics names, and a
//! multi-threaded exclusivity check. The model-based property test lives in `model_tests`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn plain_queue() -> WorkQueue<&'static str> {
    WorkQueue::new("test", ItemExponential::default())
}

#[tokio::test(start_paused = true)]
async fn add_after_hands_keys_out_in_ready_time_order() {
    let q = plain_queue();
    let start = Instant::now();
    q.add_after("a", ms(30));
    q.add_after("b", ms(10));
    q.add_after("c", ms(20));
    assert_eq!(q.len(), 0, "delayed keys are not queued yet");
    for (key, at) in [("b", 10), ("c", 20), ("a", 30)] {
        assert_eq!(q.get().await, Some(key));
        assert_eq!(start.elapsed(), ms(at));
        q.done(&key);
    }
}

#[tokio::test(start_paused = true)]
async fn add_after_keeps_the_earlier_ready_time() {
    let q = plain_queue();
    let start = Instant::now();
    q.add_after("a", ms(1000));
    q.add_after("a", ms(100)); // earlier: wins
    q.add_after("a", ms(500)); // later: ignored
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(start.elapsed(), ms(100));
    q.done(&"a");
    // The superseded 1 s entry must not hand the key out again.
    tokio::time::advance(ms(2000)).await;
    assert!(q.get().now_or_never().is_none());
}

#[tokio::test(start_paused = true)]
async fn zero_delay_adds_at_once_and_dedups_with_waiting_key() {
    let q = plain_queue();
    q.add("a");
    q.add_after("a", Duration::ZERO);
    q.add("b");
    assert_eq!(q.len(), 2);
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(q.get().await, Some("b"));
}

#[tokio::test(start_paused = true)]
async fn key_added_while_processing_is_handed_out_after_done() {
    let q = plain_queue();
    q.add("a");
    assert_eq!(q.get().await, Some("a"));
    q.add("a");
    q.add("a");
    assert_eq!(q.len(), 0, "held back while processing");
    assert!(q.get().now_or_never().is_none());
    q.done(&"a");
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await, Some("a"));
    q.done(&"a");
    assert!(q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn rate_limited_retries_back_off_exponentially_until_forgotten() {
    let q = WorkQueue::new("retry", ItemExponential::new(ms(5), ms(40)));
    let mut last = Instant::now();
    for expected in [5, 10, 20, 40, 40] {
        q.add_rate_limited("k");
        assert_eq!(q.get().await, Some("k"));
        assert_eq!(last.elapsed(), ms(expected));
        last = Instant::now();
        q.done(&"k");
    }
    assert_eq!(q.num_requeues(&"k"), 5);
    q.forget(&"k");
    assert_eq!(q.num_requeues(&"k"), 0);
    q.add_rate_limited("k");
    assert_eq!(q.get().await, Some("k"));
    assert_eq!(last.elapsed(), ms(5));
}

#[test]
fn item_exponential_default_reaches_the_cap_at_the_19th_failure() {
    let l = ItemExponential::<&str>::default();
    let delays: Vec<Duration> = (0..20).map(|_| l.when(&"k")).collect();
    assert_eq!(delays[0], ms(5));
    assert_eq!(delays[1], ms(10));
    assert_eq!(delays[2], ms(20));
    assert_eq!(delays[17], ms(5 << 17)); // 655.36 s
    assert_eq!(delays[18], Duration::from_secs(1000));
    assert_eq!(delays[19], Duration::from_secs(1000));
    assert_eq!(l.num_requeues(&"k"), 20);
    assert_eq!(l.when(&"other"), ms(5), "keys back off independently");
    for _ in 0..2000 {
        l.when(&"k"); // exponent far beyond f64 range: still capped, no panic
    }
    assert_eq!(l.when(&"k"), Duration::from_secs(1000));
}

#[tokio::test(start_paused = true)]
async fn token_bucket_reservations_accumulate_and_refill() {
    let bucket = TokenBucket::new(10.0, 2);
    let when = |b: &TokenBucket| RateLimiter::<u8>::when(b, &0);
    assert_eq!(when(&bucket), Duration::ZERO);
    assert_eq!(when(&bucket), Duration::ZERO);
    assert_eq!(when(&bucket), ms(100));
    assert_eq!(when(&bucket), ms(200));
    // 300 ms later the two reservations are paid off and one token has accrued.
    tokio::time::advance(ms(300)).await;
    assert_eq!(when(&bucket), Duration::ZERO);
    assert_eq!(when(&bucket), ms(100));
    let shared = bucket.clone();
    assert_eq!(when(&shared), ms(200), "clones draw from the same bucket");
    assert_eq!(RateLimiter::<u8>::num_requeues(&bucket, &0), 0);
}

#[test]
fn token_bucket_edge_cases_follow_x_time_rate() {
    let unlimited = TokenBucket::new(f64::INFINITY, 0);
    assert_eq!(RateLimiter::<u8>::when(&unlimited, &0), Duration::ZERO);
    let one_shot = TokenBucket::new(0.0, 1);
    assert_eq!(RateLimiter::<u8>::when(&one_shot, &0), Duration::ZERO);
    assert_eq!(RateLimiter::<u8>::when(&one_shot, &0), Duration::MAX);
    let closed = TokenBucket::new(5.0, 0);
    assert_eq!(RateLimiter::<u8>::when(&closed, &0), Duration::MAX);
}

#[tokio::test(start_paused = true)]
async fn default_controller_limiter_is_max_of_backoff_and_shared_bucket() {
    let bucket = TokenBucket::new(10.0, 100);
    let lane_a = default_controller_rate_limiter_with_bucket::<u32>(bucket.clone());
    let lane_b = default_controller_rate_limiter_with_bucket::<u32>(bucket);
    for key in 0..50 {
        assert_eq!(lane_a.when(&key), ms(5));
        assert_eq!(lane_b.when(&key), ms(5));
    }
    // The shared burst of 100 is spent: the next retry on either lane waits for the bucket.
    assert_eq!(lane_a.when(&1000), ms(100));
    assert_eq!(lane_b.when(&1000), ms(200));
    assert_eq!(lane_a.num_requeues(&1000), 1);
    lane_a.forget(&1000);
    assert_eq!(lane_a.num_requeues(&1000), 0);
    let own = default_controller_rate_limiter::<u32>();
    assert_eq!(own.when(&7), ms(5), "the plain default owns a fresh bucket");
}

#[test]
fn fast_slow_and_max_wait() {
    let l = FastSlow::new(ms(1), ms(100), 2);
    let seq: Vec<Duration> = (0..4).map(|_| l.when(&"k")).collect();
    assert_eq!(seq, [ms(1), ms(1), ms(100), ms(100)]);
    assert_eq!(l.num_requeues(&"k"), 4);
    l.forget(&"k");
    assert_eq!(l.when(&"k"), ms(1));

    let capped = WithMaxWait::new(ItemExponential::new(ms(10), ms(1000)), ms(30));
    let seq: Vec<Duration> = (0..4).map(|_| capped.when(&"k")).collect();
    assert_eq!(seq, [ms(10), ms(20), ms(30), ms(30)]);
    assert_eq!(capped.num_requeues(&"k"), 4);

    let empty = MaxOf::<u8>::new(Vec::new());
    assert_eq!(empty.when(&0), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn shutdown_hands_out_queued_keys_then_none_and_discards_delayed() {
    let q = plain_queue();
    q.add("a");
    q.add("b");
    q.add_after("late", ms(10));
    q.shutdown();
    assert!(q.is_shutting_down());
    q.add("c"); // ignored
    q.add_after("d", Duration::ZERO); // ignored
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(q.get().await, Some("b"));
    tokio::time::advance(ms(20)).await;
    assert_eq!(q.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn shutdown_wakes_parked_workers() {
    let q = plain_queue();
    let worker = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    tokio::task::yield_now().await;
    q.shutdown();
    assert_eq!(worker.await.ok(), Some(None));
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_drain_waits_for_in_flight_keys() {
    let q = plain_queue();
    q.add("a");
    q.add("b");
    let a = q.get().await;
    assert_eq!(a, Some("a"));
    let mut drain = Box::pin(q.shutdown_with_drain());
    assert!(
        (&mut drain).now_or_never().is_none(),
        "a is still processing"
    );
    assert_eq!(q.get().await, Some("b"), "queued keys are still handed out");
    q.done(&"a");
    assert!(
        (&mut drain).now_or_never().is_none(),
        "b is still processing"
    );
    q.done(&"b");
    assert!(drain.now_or_never().is_some());
}

#[tokio::test(start_paused = true)]
async fn shutdown_cancels_a_pending_drain() {
    let q = plain_queue();
    q.add("a");
    assert_eq!(q.get().await, Some("a"));
    let drainer = tokio::spawn({
        let q = q.clone();
        async move { q.shutdown_with_drain().await }
    });
    tokio::task::yield_now().await;
    assert!(!drainer.is_finished());
    q.shutdown();
    assert!(drainer.await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_workers_never_share_a_key_and_lose_no_wakeups() {
    const KEYS: usize = 64;
    const ADDS: usize = 20_000;
    let q: WorkQueue<usize> = WorkQueue::new("stress", ItemExponential::default());
    let busy: Arc<Vec<AtomicBool>> = Arc::new((0..KEYS).map(|_| AtomicBool::new(false)).collect());
    let processed = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..8 {
        let (q, busy, processed) = (q.clone(), busy.clone(), processed.clone());
        workers.push(tokio::spawn(async move {
            while let Some(key) = q.get().await {
                assert!(
                    !busy[key].swap(true, Ordering::SeqCst),
                    "key {key} handed out twice"
                );
                tokio::task::yield_now().await;
                busy[key].store(false, Ordering::SeqCst);
                processed.fetch_add(1, Ordering::SeqCst);
                q.done(&key);
            }
        }));
    }
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let q = q.clone();
            tokio::spawn(async move {
                for i in 0..ADDS / 4 {
                    q.add((i * 7 + p) % KEYS);
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.await.expect("producer");
    }
    // After shutdown the workers drain what is queued (including keys re-queued by `done`) and
    // then see `None`: every add was processed, with no wake-up lost along the way.
    q.shutdown();
    for w in workers {
        w.await.expect("worker must not panic");
    }
    assert!(q.is_empty());
    let n = processed.load(Ordering::SeqCst);
    assert!((KEYS..=ADDS).contains(&n), "processed {n}");
}

#[tokio::test(start_paused = true)]
async fn metrics_use_client_go_names_and_count_operations() {
    let mut registry = Registry::default();
    let metrics = WorkQueueMetrics::new(&mut registry);
    let q: WorkQueue<&str> = WorkQueue::builder("Nodes").metrics(&metrics).build();
    q.add("a");
    q.add("a"); // deduplicated: not an accepted add
    q.add("b");
    tokio::time::advance(ms(3)).await;
    assert_eq!(q.get().await, Some("a"));
    q.add_after("c", ms(1));
    q.add_rate_limited("d");
    // Let the 500 ms refresher observe `a` in flight.
    tokio::time::sleep(ms(600)).await;
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    for line in [
        "workqueue_adds_total{name=\"Nodes\"} 4",
        "workqueue_depth{name=\"Nodes\"} 3",
        "workqueue_retries_total{name=\"Nodes\"} 2",
        "workqueue_queue_duration_seconds_count{name=\"Nodes\"} 1",
        "workqueue_queue_duration_seconds_bucket{le=\"0.01\",name=\"Nodes\"} 1",
        "workqueue_queue_duration_seconds_bucket{le=\"0.001\",name=\"Nodes\"} 0",
        "workqueue_work_duration_seconds_count{name=\"Nodes\"} 0",
        "workqueue_unfinished_work_seconds{name=\"Nodes\"} 0.497",
        "workqueue_longest_running_processor_seconds{name=\"Nodes\"} 0.497",
    ] {
        assert!(text.contains(line), "missing `{line}` in\n{text}");
    }
    for family in [
        "workqueue_depth gauge",
        "workqueue_adds counter",
        "workqueue_queue_duration_seconds histogram",
        "workqueue_work_duration_seconds histogram",
        "workqueue_unfinished_work_seconds gauge",
        "workqueue_longest_running_processor_seconds gauge",
        "workqueue_retries counter",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family}")),
            "missing {family}"
        );
    }
    q.done(&"a");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(text.contains("workqueue_work_duration_seconds_count{name=\"Nodes\"} 1"));
}

#[tokio::test]
async fn unnamed_queues_report_no_metrics() {
    let mut registry = Registry::default();
    let metrics = WorkQueueMetrics::new(&mut registry);
    let q: WorkQueue<&str> = WorkQueue::builder("").metrics(&metrics).build();
    q.add("a");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(!text.contains("name=\"\""), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_fresh_key_overtakes_a_thousand_initial_list_keys_behind_a_slow_worker() {
    let q: WorkQueue<u32> = WorkQueue::new("priority", ItemExponential::default());
    for key in 0..1000 {
        q.add_low_priority(key);
    }
    assert_eq!(q.len(), 1000);
    // One slow worker: while it reconciles the first key, a fresh event arrives for a new key and
    // for a key still waiting in the low tier.
    let first = q.get().await;
    assert_eq!(first, Some(0));
    tokio::time::sleep(Duration::from_secs(1)).await;
    q.add(5000);
    q.add(700);
    q.add_low_priority(5000);
    assert_eq!(
        q.len(),
        1000,
        "deduplicated: 999 waiting plus the fresh key"
    );
    q.done(&0);
    let (key, cause) = q.get_with_cause().await.unwrap();
    assert_eq!((key, cause.reason), (5000, AddReason::Add));
    q.done(&5000);
    assert_eq!(
        q.get().await,
        Some(700),
        "a fresh event promotes a waiting key"
    );
    q.done(&700);
    let mut rest = Vec::new();
    while let Some(Some(key)) = q.get().now_or_never() {
        q.done(&key);
        rest.push(key);
    }
    let expected: Vec<u32> = (1..1000).filter(|k| *k != 700).collect();
    assert_eq!(
        rest, expected,
        "every other key is still verified once, in order"
    );
}

#[tokio::test(start_paused = true)]
async fn a_low_priority_add_while_processing_requeues_in_the_low_tier() {
    let q = plain_queue();
    q.add("busy");
    assert_eq!(q.get().await, Some("busy"));
    q.add_low_priority("busy");
    q.add_low_priority("other");
    q.add("fresh");
    q.done(&"busy");
    for expected in ["fresh", "other", "busy"] {
        let got = q.get().await.unwrap();
        assert_eq!(got, expected);
        q.done(&got);
    }
}

#[tokio::test(start_paused = true)]
async fn a_re_verification_unless_pending_skips_waiting_and_running_keys_only() {
    let q = plain_queue();
    q.add("busy");
    assert_eq!(q.get().await, Some("busy"));
    q.add("waiting");
    assert!(!q.add_low_priority_unless_pending("busy"));
    assert!(!q.add_low_priority_unless_pending("waiting"));
    assert!(q.add_low_priority_unless_pending("idle"));
    q.add_after("delayed", Duration::from_secs(5));
    assert!(q.add_low_priority_unless_pending("delayed"));
    q.done(&"busy");
    for expected in ["waiting", "idle", "delayed"] {
        let got = q.get().await.unwrap();
        assert_eq!(got, expected);
        q.done(&got);
    }
    assert!(
        q.is_empty(),
        "busy ran once: nothing was re-added while it ran"
    );
}
