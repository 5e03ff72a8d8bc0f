//! End-to-end controller tests with `tower::service_fn` reconcilers under tokio's paused clock:
//! outcome paths, per-key exclusivity, backpressure, panics and graceful shutdown. Layer-level
//! tests (metrics names, span fields) live in `layers::tests`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::{BoxError, Service, ServiceBuilder, service_fn};

use super::layers::{self, ControllerMetrics};
use super::*;
use crate::workqueue::{ItemExponential, WorkQueue};

type Key = &'static str;
type Reconcile = BoxFuture<'static, Result<Action, BoxError>>;

/// One observed reconcile: key, attempt, and when it started.
type Call = (Key, u32, Instant);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn lane() -> WorkQueue<Key> {
    WorkQueue::new(
        "test",
        ItemExponential::new(ms(5), Duration::from_secs(1000)),
    )
}

/// A reconciler that reports every call and answers with `behaviour(key, attempt, nth call of key)`.
fn recording(
    behaviour: impl Fn(Key, u32, usize) -> Result<Action, BoxError> + Clone + Send + Sync + 'static,
) -> (
    impl Service<Request<Key>, Response = Action, Error = BoxError, Future = Reconcile>
    + Clone
    + Send
    + 'static,
    UnboundedReceiver<Call>,
) {
    let (tx, rx) = unbounded_channel();
    let counts = Arc::new(Mutex::new(HashMap::<Key, usize>::new()));
    let service = service_fn(move |req: Request<Key>| {
        let n = {
            let mut counts = counts.lock();
            let n = counts.entry(req.key).or_default();
            *n += 1;
            *n
        };
        let _ = tx.send((req.key, req.attempt, Instant::now()));
        let result = behaviour(req.key, req.attempt, n);
        async move { result }.boxed()
    });
    (service, rx)
}

fn start<S>(controller: Controller<Key, S>) -> (CancellationToken, JoinHandle<()>)
where
    S: Service<Request<Key>, Response = Action> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    let token = CancellationToken::new();
    let handle = tokio::spawn(controller.run(token.clone()));
    (token, handle)
}

async fn next(rx: &mut UnboundedReceiver<Call>) -> Call {
    rx.recv().await.expect("reconciler dropped")
}

#[tokio::test(start_paused = true)]
async fn done_forgets_and_requeue_after_readds_after_the_delay() {
    let q = lane();
    let (svc, mut rx) = recording(|_, _, n| {
        Ok(if n == 1 {
            Action::RequeueAfter(Duration::from_secs(10))
        } else {
            Action::Done
        })
    });
    let (token, handle) = start(Controller::new("c", q.clone(), svc).workers(2));
    q.add("a");
    let (_, attempt0, t0) = next(&mut rx).await;
    let (_, attempt1, t1) = next(&mut rx).await;
    assert_eq!((attempt0, attempt1), (0, 0), "a requeue is not a failure");
    assert_eq!(t1 - t0, Duration::from_secs(10));
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(rx.try_recv().is_err(), "Done must not requeue");
    assert_eq!(q.num_requeues(&"a"), 0);
    token.cancel();
    handle.await.expect("run");
}

#[tokio::test(start_paused = true)]
async fn errors_back_off_exponentially_and_success_forgets() {
    let q = lane();
    let (svc, mut rx) = recording(|_, _, n| {
        if n <= 3 {
            Err("cloud unavailable".into())
        } else {
            Ok(Action::Done)
        }
    });
    let (token, handle) = start(Controller::new("c", q.clone(), svc));
    q.add("a");
    let (_, _, t0) = next(&mut rx).await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (_, attempt, t) = next(&mut rx).await;
        seen.push((attempt, t - t0));
    }
    assert_eq!(seen, [(1, ms(5)), (2, ms(15)), (3, ms(35))]);
    // The success forgot the backoff: a new failure starts again at 5 ms.
    tokio::time::sleep(ms(1)).await;
    assert_eq!(q.num_requeues(&"a"), 0);
    token.cancel();
    handle.await.expect("run");
}

#[derive(Debug, thiserror::Error)]
#[error("load balancer busy")]
struct Busy(#[source] RetryAfter);

#[tokio::test(start_paused = true)]
async fn retry_after_error_uses_its_delay_without_backoff() {
    let q = lane();
    let (svc, mut rx) = recording(|_, _, n| {
        if n <= 2 {
            Err(Busy(RetryAfter::new(Duration::from_secs(7), "operation pending")).into())
        } else {
            Ok(Action::Done)
        }
    });
    let (token, handle) = start(Controller::new("c", q.clone(), svc));
    q.add("svc");
    let (_, a0, t0) = next(&mut rx).await;
    let (_, a1, t1) = next(&mut rx).await;
    let (_, a2, t2) = next(&mut rx).await;
    assert_eq!(
        (a0, a1, a2),
        (0, 0, 0),
        "RetryAfter does not count as a backoff step"
    );
    assert_eq!(
        (t1 - t0, t2 - t1),
        (Duration::from_secs(7), Duration::from_secs(7))
    );
    token.cancel();
    handle.await.expect("run");
}

#[tokio::test(start_paused = true)]
async fn no_two_workers_reconcile_the_same_key_at_once() {
    const KEYS: [Key; 4] = ["k0", "k1", "k2", "k3"];
    let q = lane();
    let busy: Arc<HashMap<Key, AtomicBool>> =
        Arc::new(KEYS.iter().map(|k| (*k, AtomicBool::new(false))).collect());
    let overlap = Arc::new(AtomicBool::new(false));
    let (in_flight, max_in_flight, runs) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let svc = service_fn({
        let (busy, overlap) = (busy.clone(), overlap.clone());
        let (in_flight, max_in_flight, runs) =
            (in_flight.clone(), max_in_flight.clone(), runs.clone());
        move |req: Request<Key>| {
            let (busy, overlap) = (busy.clone(), overlap.clone());
            let (in_flight, max_in_flight, runs) =
                (in_flight.clone(), max_in_flight.clone(), runs.clone());
            async move {
                if busy[req.key].swap(true, Ordering::SeqCst) {
                    overlap.store(true, Ordering::SeqCst);
                }
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                max_in_flight.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(ms(5)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                busy[req.key].store(false, Ordering::SeqCst);
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, BoxError>(Action::Done)
            }
        }
    });
    let (token, handle) = start(Controller::new("c", q.clone(), svc).workers(8));
    for _ in 0..50 {
        for key in KEYS {
            q.add(key);
        }
        tokio::time::sleep(ms(1)).await;
    }
    tokio::time::sleep(ms(20)).await;
    token.cancel();
    handle.await.expect("run");
    assert!(
        !overlap.load(Ordering::SeqCst),
        "a key was reconciled twice at once"
    );
    assert!(
        max_in_flight.load(Ordering::SeqCst) > 1,
        "distinct keys ran in parallel"
    );
    // Adds during a 5 ms reconcile coalesce into one more run: ~11 runs per key, not 50.
    let runs = runs.load(Ordering::SeqCst);
    assert!(
        (KEYS.len() * 8..KEYS.len() * 15).contains(&runs),
        "runs: {runs}"
    );
}

#[tokio::test(start_paused = true)]
async fn workers_respect_poll_ready_backpressure() {
    let q = lane();
    let (in_flight, max_in_flight) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (tx, mut rx) = unbounded_channel();
    let inner = service_fn({
        let (in_flight, max_in_flight) = (in_flight.clone(), max_in_flight.clone());
        move |req: Request<Key>| {
            let (in_flight, max_in_flight, tx) =
                (in_flight.clone(), max_in_flight.clone(), tx.clone());
            async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                max_in_flight.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(ms(10)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                let _ = tx.send(req.key);
                Ok::<_, BoxError>(Action::Done)
            }
        }
    });
    // Clones of a ConcurrencyLimit share one semaphore: at most 2 reconciles in the whole pool.
    let svc = ServiceBuilder::new().concurrency_limit(2).service(inner);
    let (token, handle) = start(Controller::new("c", q.clone(), svc).workers(6));
    let keys = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    for key in keys {
        q.add(key);
    }
    let mut done = Vec::new();
    for _ in keys {
        done.push(rx.recv().await.expect("reconciled"));
    }
    done.sort_unstable();
    assert_eq!(done, keys);
    assert_eq!(max_in_flight.load(Ordering::SeqCst), 2);
    token.cancel();
    handle.await.expect("run");
}

#[tokio::test(start_paused = true)]
async fn a_panicking_reconcile_does_not_take_down_the_pool() {
    let mut registry = Registry::default();
    let metrics = ControllerMetrics::new(&mut registry);
    let q = lane();
    let (tx, mut rx) = unbounded_channel();
    let inner = service_fn(move |req: Request<Key>| {
        if req.key == "sync-panic" && req.attempt == 0 {
            panic!("panic while creating the reconcile");
        }
        let tx = tx.clone();
        async move {
            if req.key == "async-panic" && req.attempt == 0 {
                panic!("panic inside the reconcile");
            }
            let _ = tx.send((req.key, req.attempt));
            Ok::<_, BoxError>(Action::Done)
        }
    });
    let svc = layers::standard("c", &metrics, Duration::from_secs(30)).service(inner);
    let (token, handle) = start(Controller::new("c", q.clone(), svc).workers(2));
    for key in ["sync-panic", "ok-1", "async-panic", "ok-2"] {
        q.add(key);
    }
    let mut finished = Vec::new();
    for _ in 0..4 {
        finished.push(rx.recv().await.expect("reconciled"));
    }
    finished.sort_unstable();
    assert_eq!(
        finished,
        [
            ("async-panic", 1),
            ("ok-1", 0),
            ("ok-2", 0),
            ("sync-panic", 1)
        ],
        "both panicking keys were retried with backoff, the others ran normally"
    );
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(text.contains("controller_runtime_reconcile_panics_total{controller=\"c\"} 2"));
    assert!(text.contains("controller_runtime_reconcile_errors_total{controller=\"c\"} 2"));
    token.cancel();
    handle.await.expect("the pool survived");
}

#[tokio::test(start_paused = true)]
async fn workers_survive_panics_even_without_the_panic_layer() {
    let q = lane();
    let (tx, mut rx) = unbounded_channel();
    let svc = service_fn(move |req: Request<Key>| {
        let tx = tx.clone();
        async move {
            if req.attempt == 0 {
                panic!("unguarded");
            }
            let _ = tx.send(req.attempt);
            Ok::<_, BoxError>(Action::Done)
        }
    });
    let (token, handle) = start(Controller::new("c", q.clone(), svc));
    q.add("a");
    assert_eq!(rx.recv().await, Some(1));
    token.cancel();
    handle.await.expect("run");
}

#[tokio::test(start_paused = true)]
async fn timeout_is_an_error_requeued_with_backoff() {
    let mut registry = Registry::default();
    let metrics = ControllerMetrics::new(&mut registry);
    let q = lane();
    let (tx, mut rx) = unbounded_channel();
    let inner = service_fn(move |req: Request<Key>| {
        let tx = tx.clone();
        async move {
            let _ = tx.send((req.attempt, Instant::now()));
            if req.attempt == 0 {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Ok::<_, BoxError>(Action::Done)
        }
    });
    let svc = layers::standard("c", &metrics, Duration::from_secs(1)).service(inner);
    let (token, handle) = start(Controller::new("c", q.clone(), svc));
    q.add("slow");
    let (a0, t0) = rx.recv().await.expect("first");
    let (a1, t1) = rx.recv().await.expect("retry");
    assert_eq!((a0, a1), (0, 1));
    assert_eq!(t1 - t0, Duration::from_secs(1) + ms(5));
    token.cancel();
    handle.await.expect("run");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(
        text.contains("controller_runtime_reconcile_total{controller=\"c\",result=\"error\"} 1")
    );
    assert!(text.contains("controller_runtime_reconcile_panics_total{controller=\"c\"} 0"));
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_in_flight_reconciles_finish_and_takes_no_new_work() {
    let q = lane();
    let release = Arc::new(tokio::sync::Notify::new());
    let finished = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = unbounded_channel();
    let svc = service_fn({
        let (release, finished) = (release.clone(), finished.clone());
        move |req: Request<Key>| {
            let (release, finished, tx) = (release.clone(), finished.clone(), tx.clone());
            async move {
                let _ = tx.send(req.key);
                release.notified().await;
                finished.store(true, Ordering::SeqCst);
                Ok::<_, BoxError>(Action::Done)
            }
        }
    });
    let (token, mut handle) = start(Controller::new("c", q.clone(), svc));
    q.add("in-flight");
    q.add("queued");
    assert_eq!(rx.recv().await, Some("in-flight"));
    token.cancel();
    // Give shutdown every chance to finish early: it must wait for the in-flight reconcile.
    tokio::select! {
        _ = &mut handle => panic!("run returned while a reconcile was in flight"),
        () = tokio::time::sleep(Duration::from_secs(60)) => {}
    }
    assert!(q.is_shutting_down());
    release.notify_one();
    handle.await.expect("run");
    assert!(finished.load(Ordering::SeqCst));
    assert!(
        rx.try_recv().is_err(),
        "no new key was started after shutdown"
    );
}

#[tokio::test(start_paused = true)]
async fn abandoned_in_flight_reconciles_are_dropped_before_run_returns() {
    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let q = lane();
    let dropped = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = unbounded_channel();
    let svc = service_fn({
        let dropped = dropped.clone();
        move |req: Request<Key>| {
            let (guard, tx) = (SetOnDrop(dropped.clone()), tx.clone());
            async move {
                let _guard = guard;
                let _ = tx.send(req.key);
                std::future::pending::<()>().await;
                Ok::<_, BoxError>(Action::Done)
            }
        }
    });
    let abandon = CancellationToken::new();
    let scope = ControllerScope::new("c", abandon.clone());
    let stop = CancellationToken::new();
    let handle = tokio::spawn(scope.scope(Controller::new("c", q.clone(), svc).run(stop.clone())));
    q.add("stuck");
    assert_eq!(rx.recv().await, Some("stuck"));
    stop.cancel();
    abandon.cancel();
    tokio::time::timeout(Duration::from_secs(1), handle)
        .await
        .expect("run returns once its in-flight work is dropped")
        .expect("run");
    assert!(
        dropped.load(Ordering::SeqCst),
        "the reconcile future is gone"
    );
}

#[tokio::test(start_paused = true)]
async fn run_returns_when_the_queue_is_shut_down_elsewhere() {
    let q = lane();
    let (svc, _rx) = recording(|_, _, _| Ok(Action::Done));
    let (_token, handle) = start(Controller::new("c", q.clone(), svc).workers(3));
    tokio::task::yield_now().await;
    q.shutdown();
    handle.await.expect("run");
}

#[tokio::test(start_paused = true)]
async fn zero_workers_leave_the_controller_idle_until_shutdown() {
    let q = lane();
    let (svc, mut rx) = recording(|_, _, _| Ok(Action::Done));
    let (token, mut handle) = start(Controller::new("c", q.clone(), svc).workers(0));
    q.add("a");
    tokio::select! {
        _ = &mut handle => panic!("run returned before shutdown"),
        () = tokio::time::sleep(Duration::from_secs(60)) => {}
    }
    assert!(!q.is_shutting_down());
    assert!(rx.try_recv().is_err());
    token.cancel();
    handle.await.expect("run");
}

/// Fails `poll_ready` while `fail_next` is set and stays broken afterwards, as tower allows;
/// only a fresh clone is usable again.
#[derive(Clone)]
struct BreaksOnce {
    fail_next: Arc<AtomicBool>,
    broken: bool,
    tx: tokio::sync::mpsc::UnboundedSender<u32>,
}

impl Service<Request<Key>> for BreaksOnce {
    type Response = Action;
    type Error = BoxError;
    type Future = Reconcile;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        if self.broken || self.fail_next.swap(false, Ordering::SeqCst) {
            self.broken = true;
            return std::task::Poll::Ready(Err("backend gone".into()));
        }
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Key>) -> Reconcile {
        let _ = self.tx.send(req.attempt);
        async { Ok(Action::Done) }.boxed()
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_poll_ready_requeues_the_key_and_replaces_the_service() {
    let q = lane();
    let (tx, mut rx) = unbounded_channel();
    let svc = BreaksOnce {
        fail_next: Arc::new(AtomicBool::new(true)),
        broken: false,
        tx,
    };
    let (token, handle) = start(Controller::new("c", q.clone(), svc));
    q.add("a");
    assert_eq!(
        rx.recv().await,
        Some(1),
        "retried with backoff on a fresh clone"
    );
    token.cancel();
    handle.await.expect("run");
}
