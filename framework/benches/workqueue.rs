//! Work-queue cost against anchors §A1 (≤ 1 µs per add/get/done uncontended; no lock convoy with
//! 1,000 workers and 1,000,000 keys), beside kube-runtime's queue machinery on the same workload.
//!
//! `cargo bench -p controller-manager --bench workqueue`
//!
//! kube-runtime has no work-queue type; its closest public APIs are:
//! - `kube_runtime::scheduler`: the dedup + delay stream every `Controller` uses (a `DelayQueue`
//!   plus a `HashMap`), fed by a channel; its "add" is a channel send and its "get" is polling
//!   the stream. It has no "done": one-in-flight per key lives in the private `Runner`.
//! - `kube_runtime::applier`: scheduler + runner + store lookup, i.e. everything a `Controller`
//!   does after the watcher. Keys are `ObjectRef`s looked up in a reflector `Store`, and
//!   "1,000 workers" is `Config::concurrency(1000)`: up to 1,000 reconcile futures polled by the
//!   applier's one task.
//!
//! A plain harness (no criterion): each figure is one timed loop, printed as a markdown row.

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use controller_manager::informer::ObjectKey;
use controller_manager::workqueue::{ItemExponential, QueueKey, WorkQueue};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_runtime::controller::Action;
use kube_runtime::reflector::{self, ObjectRef};
use kube_runtime::scheduler::{ScheduleRequest, scheduler};
use kube_runtime::watcher;
use tokio::sync::Notify;

/// Keys preloaded before the contended run (controller-runtime PR #3415's setup).
const PRELOADED: usize = 1_000_000;
/// Keys added by producers while the workers drain.
const ADDED: usize = 1_000_000;
const PRODUCERS: usize = 4;
const WORKERS: usize = 1_000;
/// Distinct keys cycled through in the uncontended loops.
const CYCLE_KEYS: usize = 4_096;
/// Upper bound on one uncontended loop, so a slow implementation still finishes.
const BUDGET: Duration = Duration::from_secs(3);

fn ns(total: Duration, ops: usize) -> f64 {
    total.as_nanos() as f64 / ops as f64
}

fn object_key(i: usize) -> ObjectKey {
    ObjectKey::namespaced("bench", format!("object-{i:07}"))
}

fn object_ref(i: usize) -> ObjectRef<ConfigMap> {
    ObjectRef::new(&format!("object-{i:07}")).within("bench")
}

/// p50, p99, max of nanosecond samples, in microseconds.
fn percentiles(mut samples: Vec<u64>) -> (f64, f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    samples.sort_unstable();
    let at =
        |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)] as f64 / 1e3;
    (at(0.5), at(0.99), samples[samples.len() - 1] as f64 / 1e3)
}

/// Ours: one add + get + done at a time on one thread.
fn ours_uncontended<K: QueueKey>(
    rt: &tokio::runtime::Runtime,
    label: &str,
    key: impl Fn(usize) -> K,
) {
    let keys: Vec<K> = (0..CYCLE_KEYS).map(key).collect();
    let q: WorkQueue<K> = WorkQueue::new("bench", ItemExponential::default());
    let (cycles, elapsed) = rt.block_on(async {
        let start = Instant::now();
        let mut cycles = 0;
        while cycles < 2_000_000 && (cycles % 65_536 != 0 || start.elapsed() < BUDGET) {
            q.add(keys[cycles % CYCLE_KEYS].clone());
            if let Some(k) = q.get().await {
                q.done(black_box(&k));
            }
            cycles += 1;
        }
        (cycles, start.elapsed())
    });
    println!(
        "| ours `WorkQueue` add+get+done ({label}) | {cycles} | {:.0} | {:.0} |",
        ns(elapsed, cycles),
        ns(elapsed, cycles * 3)
    );
}

/// kube-runtime `scheduler`: send a request due now, take it from the stream.
fn kube_scheduler_uncontended(rt: &tokio::runtime::Runtime) {
    let keys: Vec<ObjectRef<ConfigMap>> = (0..CYCLE_KEYS).map(object_ref).collect();
    let (cycles, elapsed) = rt.block_on(async {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut s = std::pin::pin!(scheduler(rx));
        let start = Instant::now();
        let mut cycles = 0;
        while start.elapsed() < BUDGET {
            let sent = tx.unbounded_send(ScheduleRequest {
                message: keys[cycles % CYCLE_KEYS].clone(),
                run_at: tokio::time::Instant::now(),
            });
            if sent.is_err() || s.next().await.is_none() {
                break;
            }
            cycles += 1;
        }
        (cycles, start.elapsed())
    });
    println!(
        "| kube-runtime `scheduler` send+next (ObjectRef) | {cycles} | {:.0} | {:.0} (2 ops) |",
        ns(elapsed, cycles),
        ns(elapsed, cycles * 2)
    );
}

/// A reflector store holding `n` ConfigMaps named like [`object_ref`], ready for an applier.
fn filled_store(n: usize) -> reflector::Store<ConfigMap> {
    let (reader, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&watcher::Event::Init);
    for i in 0..n {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("object-{i:07}")),
                namespace: Some("bench".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        writer.apply_watcher_event(&watcher::Event::InitApply(cm));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    reader
}

/// Counts reconciles and wakes a waiter at a target.
struct Count {
    done: AtomicUsize,
    target: usize,
    reached: Notify,
}

impl Count {
    fn hit(&self) {
        if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.target {
            self.reached.notify_one();
        }
    }
}

/// kube-runtime `applier`: send one `ObjectRef`, wait for its reconcile to finish.
fn kube_applier_uncontended(rt: &tokio::runtime::Runtime) {
    let store = filled_store(CYCLE_KEYS);
    let (cycles, elapsed) = rt.block_on(async {
        let (tx, rx) = futures::channel::mpsc::unbounded::<ObjectRef<ConfigMap>>();
        let applier = kube_runtime::applier(
            |_cm, _ctx: Arc<()>| {
                futures::future::ready(Ok::<_, Infallible>(Action::await_change()))
            },
            |_, _: &Infallible, _| Action::await_change(),
            Arc::new(()),
            store,
            rx.map(Ok::<_, Infallible>),
            kube_runtime::Config::default(),
        );
        let mut applier = std::pin::pin!(applier);
        let start = Instant::now();
        let mut cycles = 0;
        while start.elapsed() < BUDGET {
            if tx.unbounded_send(object_ref(cycles % CYCLE_KEYS)).is_err()
                || applier.next().await.is_none()
            {
                break;
            }
            cycles += 1;
        }
        (cycles, start.elapsed())
    });
    println!(
        "| kube-runtime `applier` send+reconcile (ObjectRef) | {cycles} | {:.0} | {:.0} (2 ops) |",
        ns(elapsed, cycles),
        ns(elapsed, cycles * 2)
    );
}

/// Ours: 1,000,000 queued keys drained by 1,000 workers while 4 producers add 1,000,000 more,
/// timing every producer add.
fn ours_contended(rt: &tokio::runtime::Runtime) {
    let q: WorkQueue<ObjectKey> = WorkQueue::new("bench", ItemExponential::default());
    for i in 0..PRELOADED {
        q.add(object_key(i));
    }
    let fresh: Vec<Vec<ObjectKey>> = (0..PRODUCERS)
        .map(|p| {
            (0..ADDED / PRODUCERS)
                .map(|i| object_key(PRELOADED + p * ADDED / PRODUCERS + i))
                .collect()
        })
        .collect();
    let (elapsed, latencies, processed) = rt.block_on(async {
        let start = Instant::now();
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move {
                    let mut n = 0usize;
                    while let Some(key) = q.get().await {
                        q.done(black_box(&key));
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let producers: Vec<_> = fresh
            .into_iter()
            .map(|keys| {
                let q = q.clone();
                tokio::spawn(async move {
                    let mut took = Vec::with_capacity(keys.len());
                    for (i, key) in keys.into_iter().enumerate() {
                        let t = Instant::now();
                        q.add(key);
                        took.push(t.elapsed().as_nanos() as u64);
                        if i % 1024 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                    took
                })
            })
            .collect();
        let mut latencies = Vec::with_capacity(ADDED);
        for p in producers {
            latencies.extend(p.await.unwrap_or_default());
        }
        q.shutdown();
        let mut processed = 0;
        for w in workers {
            processed += w.await.unwrap_or(0);
        }
        (start.elapsed(), latencies, processed)
    });
    let (p50, p99, max) = percentiles(latencies);
    println!(
        "| ours `WorkQueue` ({WORKERS} workers) | {processed} | {:.2} | {:.0} | {p50:.2} | {p99:.2} | {max:.0} |",
        processed as f64 / elapsed.as_secs_f64() / 1e6,
        ns(elapsed, processed),
    );
}

/// kube-runtime `applier` with concurrency 1,000 on the same workload: 1,000,000 `ObjectRef`s
/// queued before it starts, 4 producers sending 1,000,000 more, timing every send.
fn kube_applier_contended(rt: &tokio::runtime::Runtime) {
    let total = PRELOADED + ADDED;
    let store = filled_store(total);
    let count = Arc::new(Count {
        done: AtomicUsize::new(0),
        target: total,
        reached: Notify::new(),
    });
    let (tx, rx) = futures::channel::mpsc::unbounded::<ObjectRef<ConfigMap>>();
    for i in 0..PRELOADED {
        let _ = tx.unbounded_send(object_ref(i));
    }
    let fresh: Vec<Vec<ObjectRef<ConfigMap>>> = (0..PRODUCERS)
        .map(|p| {
            (0..ADDED / PRODUCERS)
                .map(|i| object_ref(PRELOADED + p * ADDED / PRODUCERS + i))
                .collect()
        })
        .collect();
    let (elapsed, latencies) = rt.block_on(async {
        let start = Instant::now();
        let applier = kube_runtime::applier(
            |_cm, c: Arc<Count>| {
                c.hit();
                futures::future::ready(Ok::<_, Infallible>(Action::await_change()))
            },
            |_, _: &Infallible, _| Action::await_change(),
            Arc::clone(&count),
            store,
            rx.map(Ok::<_, Infallible>),
            kube_runtime::Config::default().concurrency(WORKERS as u16),
        );
        let driver = tokio::spawn(applier.for_each(|_| std::future::ready(())));
        let producers: Vec<_> = fresh
            .into_iter()
            .map(|refs| {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut took = Vec::with_capacity(refs.len());
                    for (i, r) in refs.into_iter().enumerate() {
                        let t = Instant::now();
                        let _ = tx.unbounded_send(r);
                        took.push(t.elapsed().as_nanos() as u64);
                        if i % 1024 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                    took
                })
            })
            .collect();
        let mut latencies = Vec::with_capacity(ADDED);
        for p in producers {
            latencies.extend(p.await.unwrap_or_default());
        }
        count.reached.notified().await;
        let elapsed = start.elapsed();
        driver.abort();
        (elapsed, latencies)
    });
    let processed = count.done.load(Ordering::Acquire);
    let (p50, p99, max) = percentiles(latencies);
    println!(
        "| kube-runtime `applier` (concurrency {WORKERS}) | {processed} | {:.2} | {:.0} | {p50:.2} | {p99:.2} | {max:.0} |",
        processed as f64 / elapsed.as_secs_f64() / 1e6,
        ns(elapsed, processed),
    );
}

fn main() {
    let single = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!("## 2a. Uncontended (one task, current-thread runtime, {CYCLE_KEYS} keys cycled)\n");
    println!("| implementation | cycles | ns/cycle | ns/op |");
    println!("|---|---|---|---|");
    ours_uncontended(&single, "u64", |i| i as u64);
    ours_uncontended(&single, "ObjectKey", object_key);
    kube_scheduler_uncontended(&single);
    kube_applier_uncontended(&single);
    println!();
    let multi = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "## 2b. Contended ({PRELOADED} keys queued, {PRODUCERS} producers add {ADDED} more, {WORKERS} workers, 2 runtime threads)\n"
    );
    println!(
        "| implementation | items | M items/s | ns/item | add p50 µs | add p99 µs | add max µs |"
    );
    println!("|---|---|---|---|---|---|---|");
    ours_contended(&multi);
    kube_applier_contended(&multi);
}
