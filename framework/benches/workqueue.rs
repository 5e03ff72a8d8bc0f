//! Work-queue throughput against anchors §A1 (≤ 1 µs per add/get/done uncontended; no lock
//! convoy with 1,000 workers and 1,000,000 keys). A plain harness keeps criterion out of the
//! test build; run with `cargo bench -p controller-manager --bench workqueue`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use controller_manager::workqueue::{ItemExponential, WorkQueue};

fn queue() -> WorkQueue<u64> {
    WorkQueue::new("bench", ItemExponential::default())
}

fn per_op(total: Duration, ops: u64) -> f64 {
    total.as_nanos() as f64 / ops as f64
}

/// One add + get + done cycle at a time, on one thread: the per-operation cost of the lock,
/// the sets and the wake-up path.
fn uncontended(rt: &tokio::runtime::Runtime) {
    const CYCLES: u64 = 1_000_000;
    let q = queue();
    let elapsed = rt.block_on(async {
        let start = Instant::now();
        for i in 0..CYCLES {
            q.add(i % 4096);
            let key = q.get().await.unwrap_or_default();
            q.done(black_box(&key));
        }
        start.elapsed()
    });
    println!(
        "uncontended add+get+done: {:.0} ns/cycle, {:.0} ns/op",
        per_op(elapsed, CYCLES),
        per_op(elapsed, CYCLES * 3)
    );
}

/// 1,000,000 queued keys drained by 1,000 workers while 4 producers keep adding: a lock
/// convoy would show up as a collapse in items per second.
fn contended(rt: &tokio::runtime::Runtime) {
    const KEYS: u64 = 1_000_000;
    const WORKERS: usize = 1_000;
    let q = queue();
    for key in 0..KEYS {
        q.add(key);
    }
    let elapsed = rt.block_on(async {
        let start = Instant::now();
        let producers: Vec<_> = (0..4u64)
            .map(|p| {
                let q = q.clone();
                tokio::spawn(async move {
                    for i in 0..KEYS / 4 {
                        q.add(KEYS + p * KEYS / 4 + i);
                        if i % 1024 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move {
                    let mut n = 0u64;
                    while let Some(key) = q.get().await {
                        q.done(black_box(&key));
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        for p in producers {
            let _ = p.await;
        }
        q.shutdown();
        let mut processed = 0;
        for w in workers {
            processed += w.await.unwrap_or(0);
        }
        assert_eq!(processed, 2 * KEYS);
        start.elapsed()
    });
    println!(
        "contended ({WORKERS} workers, {} keys, 4 producers): {:.0} ns/item, {:.2} M items/s",
        2 * KEYS,
        per_op(elapsed, 2 * KEYS),
        2.0 * KEYS as f64 / elapsed.as_secs_f64() / 1e6
    );
}

fn main() {
    let single = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    uncontended(&single);
    let multi = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .expect("runtime");
    contended(&multi);
}
