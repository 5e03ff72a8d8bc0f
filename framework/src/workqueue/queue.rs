//! The [`WorkQueue`] handle: locking, waking, background timers and the builder around
//! [`super::state::State`].
//!
//! One `parking_lot::Mutex` guards all state; waiters in [`WorkQueue::get`] park on a
//! `tokio::sync::Notify` that is armed *before* the state is checked, so a wake-up between the
//! check and the await is never lost. Delayed keys sit in a min-heap under the same lock; every
//! operation first promotes keys whose time has come (one branch when nothing is delayed), and a
//! small background task sleeps until the earliest ready time to wake parked workers. That task
//! (and the 500 ms in-flight gauge refresher, when metrics are on) is spawned on the first call
//! made inside a tokio runtime and ends when the queue is shut down or dropped.

use std::fmt::Debug;
use std::hash::Hash;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::{Duration, Instant};

use super::cause::{AddReason, Cause, enqueue_span};
use super::metrics::WorkQueueMetrics;
use super::rate_limit::{RateLimiter, default_controller_rate_limiter};
use super::state::{Scheduled, State};
use crate::informer::EventSource;

/// How often the unfinished/longest-running gauges are refreshed (client-go's period).
const IN_FLIGHT_REFRESH: Duration = Duration::from_millis(500);

/// The bounds a key needs to be queued; blanket-implemented, so any such type qualifies.
pub trait QueueKey: Clone + Eq + Hash + Send + Sync + Debug + 'static {}
impl<T: Clone + Eq + Hash + Send + Sync + Debug + 'static> QueueKey for T {}

/// A controller's lane of work, with client-go's guarantees: a waiting key is queued once, a key is
/// never handed to two workers at once, and a key added while it is processed is handed out again
/// after [`done`](Self::done). Clones are handles to the same queue.
pub struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

struct Inner<K> {
    name: String,
    state: Mutex<State<K>>,
    /// Workers parked in `get`.
    ready: Notify,
    /// `shutdown_with_drain` callers waiting for the processing set to empty.
    drained: Notify,
    /// Wakes the delay task when an earlier ready time arrives, on shutdown and on drop.
    timer: Arc<Notify>,
    limiter: Box<dyn RateLimiter<K>>,
    background_started: AtomicBool,
    has_metrics: bool,
}

impl<K> Drop for Inner<K> {
    fn drop(&mut self) {
        // The delay task holds only a weak reference; this lets it notice and exit.
        self.timer.notify_one();
    }
}

/// Configures a [`WorkQueue`] when the defaults (controller rate limiter, no metrics) do not fit.
pub struct WorkQueueBuilder<K> {
    name: String,
    limiter: Option<Box<dyn RateLimiter<K>>>,
    metrics: Option<WorkQueueMetrics>,
}

impl<K: QueueKey> WorkQueueBuilder<K> {
    /// Replaces the default controller rate limiter used by `add_rate_limited`.
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<K>) -> Self {
        self.limiter = Some(Box::new(limiter));
        self
    }

    /// Reports this queue under the client-go `workqueue_*` families, labelled with its name.
    pub fn metrics(mut self, metrics: &WorkQueueMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// Creates the queue; background timers start with the first call made inside a runtime.
    pub fn build(self) -> WorkQueue<K> {
        let limiter = self
            .limiter
            .unwrap_or_else(|| Box::new(default_controller_rate_limiter()));
        // As in client-go, an unnamed queue has no metrics (they could not be told apart).
        let metrics = self
            .metrics
            .filter(|_| !self.name.is_empty())
            .map(|m| m.for_queue(&self.name));
        let queue = WorkQueue {
            inner: Arc::new(Inner {
                has_metrics: metrics.is_some(),
                name: self.name,
                state: Mutex::new(State::new(metrics)),
                ready: Notify::new(),
                drained: Notify::new(),
                timer: Arc::new(Notify::new()),
                limiter,
                background_started: AtomicBool::new(false),
            }),
        };
        queue.ensure_background();
        queue
    }
}

impl<K: QueueKey> WorkQueue<K> {
    /// A queue without metrics; `limiter` decides the delays of `add_rate_limited`.
    pub fn new(name: impl Into<String>, limiter: impl RateLimiter<K>) -> Self {
        Self::builder(name).rate_limiter(limiter).build()
    }

    /// Starts configuring a queue named `name` (the `name` label of its metrics).
    pub fn builder(name: impl Into<String>) -> WorkQueueBuilder<K> {
        WorkQueueBuilder {
            name: name.into(),
            limiter: None,
            metrics: None,
        }
    }

    /// The lane's name, as used in metrics and logs.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Marks `key` as needing processing; ignored after shutdown and while it is already waiting
    /// (then only its [`Cause`] is recorded).
    pub fn add(&self, key: K) {
        let cause = self.cause(&key, AddReason::Add);
        let pushed = {
            let mut state = self.inner.state.lock();
            let promoted = state.promote_if_delayed();
            promoted + usize::from(state.add(key, cause))
        };
        self.wake(pushed);
    }

    /// Marks `key` as needing processing at low priority: it is handed out only when no normal
    /// key waits (controller-runtime's priority queue puts its initial list there), and a normal
    /// [`add`](Self::add) while it waits moves it ahead. For re-verifications: keys of an initial
    /// list, relist or resync, so fresh changes are reconciled first after a (re)start. Each key is
    /// still handed out once; only the order changes. A steady stream of normal adds delays the
    /// low tier until it pauses.
    pub fn add_low_priority(&self, key: K) {
        let cause = self.cause(&key, AddReason::LowPriority);
        let pushed = {
            let mut state = self.inner.state.lock();
            let promoted = state.promote_if_delayed();
            promoted + usize::from(state.add_in_tier(key, cause, true))
        };
        self.wake(pushed);
    }

    /// [`add_low_priority`](Self::add_low_priority), unless `key` is waiting or being processed
    /// already: a re-verification that the pending or running reconcile covers. Whether it
    /// was added.
    pub fn add_low_priority_unless_pending(&self, key: K) -> bool {
        let cause = self.cause(&key, AddReason::LowPriority);
        let pushed = {
            let mut state = self.inner.state.lock();
            let promoted = state.promote_if_delayed();
            if state.is_pending(&key) {
                drop(state);
                self.wake(promoted);
                return false;
            }
            promoted + usize::from(state.add_in_tier(key, cause, true))
        };
        self.wake(pushed);
        true
    }

    /// [`add`](Self::add) for a key of a live watch change, [`add_low_priority`](Self::add_low_priority)
    /// for one of a re-delivered object (see [`EventSource::is_fresh`]); what an event handler
    /// registered with [`crate::informer::WithSource`] calls.
    pub fn add_from(&self, key: K, source: EventSource) {
        if source.is_fresh() {
            self.add(key);
        } else {
            self.add_low_priority(key);
        }
    }

    /// Adds `key` once `delay` has passed; if it is already waiting, the earlier time wins.
    pub fn add_after(&self, key: K, delay: Duration) {
        let cause = self.cause(&key, AddReason::AddAfter);
        self.schedule(key, delay, cause);
    }

    /// Retries `key` after the delay its rate limiter decides (client-go `AddRateLimited`).
    pub fn add_rate_limited(&self, key: K) {
        let delay = self.inner.limiter.when(&key);
        let cause = self.cause(&key, AddReason::RateLimited);
        self.schedule(key, delay, cause);
    }

    /// Opens the add's `enqueue` span (outside the lock) and keeps its context as the cause.
    fn cause(&self, key: &K, reason: AddReason) -> Cause {
        Cause::new(reason, enqueue_span(&self.inner.name, key, reason))
    }

    fn schedule(&self, key: K, delay: Duration, cause: Cause) {
        let now = Instant::now();
        let (scheduled, promoted) = {
            let mut state = self.inner.state.lock();
            let promoted = if delay.is_zero() {
                state.promote_if_delayed()
            } else {
                state.promote_due(now)
            };
            (state.schedule(key, delay, now, cause), promoted)
        };
        self.wake(promoted);
        match scheduled {
            Scheduled::Ignored | Scheduled::Waiting(false) => {}
            Scheduled::Added(pushed) => self.wake(usize::from(pushed)),
            Scheduled::Waiting(true) => {
                self.ensure_background();
                self.inner.timer.notify_one();
            }
        }
    }

    /// Clears `key`'s failure history after a success, so its next failure backs off from scratch.
    pub fn forget(&self, key: &K) {
        self.inner.limiter.forget(key);
    }

    /// How many times `key` has been retried through the rate limiter since it was last forgotten.
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.inner.limiter.num_requeues(key)
    }

    /// Waits for the next key and marks it processing; `None` once shut down and empty.
    /// Every key returned must be passed to [`done`](Self::done). Cancel-safe: a `get` dropped
    /// before it returns takes no key, so it can sit in `select!` beside a shutdown signal.
    pub async fn get(&self) -> Option<K> {
        self.get_with_cause().await.map(|(key, _)| key)
    }

    /// Like [`get`](Self::get), and also says why the key was queued, so the reconcile's span
    /// can link to the adds that caused it (see [`Cause`]).
    pub async fn get_with_cause(&self) -> Option<(K, Cause)> {
        self.ensure_background();
        loop {
            let mut notified = pin!(self.inner.ready.notified());
            notified.as_mut().enable();
            {
                let mut state = self.inner.state.lock();
                let promoted = state.promote_if_delayed();
                if let Some(handed_out) = state.pop() {
                    drop(state);
                    // Keys promoted beyond the one taken here are for other waiters.
                    self.wake(promoted.saturating_sub(1));
                    return Some(handed_out);
                }
                if state.shutting_down {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Ends processing of `key`; if it was added meanwhile, it is queued again.
    pub fn done(&self, key: &K) {
        let (requeued, drained) = {
            let mut state = self.inner.state.lock();
            let promoted = state.promote_if_delayed();
            let requeued = state.done(key);
            (
                promoted + usize::from(requeued),
                state.drain && state.processing_is_empty(),
            )
        };
        self.wake(requeued);
        if drained {
            self.inner.drained.notify_waiters();
        }
    }

    /// Keys waiting to be handed out (not those processing or delayed), like client-go's `Len`.
    pub fn len(&self) -> usize {
        let mut state = self.inner.state.lock();
        let promoted = state.promote_if_delayed();
        let len = state.len();
        drop(state);
        self.wake(promoted);
        len
    }

    /// Whether no key is waiting to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops accepting keys and discards delayed ones; queued keys are still handed out until the
    /// queue is empty, then `get` returns `None`. Cancels a concurrent drain.
    pub fn shutdown(&self) {
        self.shut_down(false);
        self.wake_all();
    }

    /// Like [`shutdown`](Self::shutdown), then waits until every key handed out is `done`.
    pub async fn shutdown_with_drain(&self) {
        self.shut_down(true);
        loop {
            let mut notified = pin!(self.inner.drained.notified());
            notified.as_mut().enable();
            {
                let state = self.inner.state.lock();
                if !state.drain || state.processing_is_empty() {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Whether shutdown has begun, so producers can stop early.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.state.lock().shutting_down
    }

    /// Keys already due are queued first (as client-go's timer would have), the rest discarded.
    fn shut_down(&self, drain: bool) {
        {
            let mut state = self.inner.state.lock();
            state.promote_if_delayed();
            state.shut_down(drain);
        }
        self.wake_all();
    }

    fn wake(&self, n: usize) {
        for _ in 0..n {
            self.inner.ready.notify_one();
        }
    }

    fn wake_all(&self) {
        self.inner.ready.notify_waiters();
        self.inner.drained.notify_waiters();
        self.inner.timer.notify_one();
    }

    /// Spawns the delay task (and the gauge refresher) once, if a tokio runtime is available.
    fn ensure_background(&self) {
        if self.inner.background_started.load(Ordering::Acquire) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.inner.background_started.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        handle.spawn(run_timer(weak.clone(), Arc::clone(&self.inner.timer)));
        if self.inner.has_metrics {
            // The first refresh is due one period after creation, not when the task first runs.
            let first = Instant::now() + IN_FLIGHT_REFRESH;
            handle.spawn(refresh_in_flight(weak, first));
        }
    }
}

/// Sleeps until the earliest delayed key is due, promotes due keys and wakes that many workers.
async fn run_timer<K: QueueKey>(queue: Weak<Inner<K>>, timer: Arc<Notify>) {
    loop {
        let mut notified = pin!(timer.notified());
        notified.as_mut().enable();
        let next = {
            let Some(inner) = queue.upgrade() else { return };
            let queue = WorkQueue { inner };
            let mut state = queue.inner.state.lock();
            if state.shutting_down {
                return;
            }
            let promoted = state.promote_due(Instant::now());
            let next = state.next_ready();
            drop(state);
            queue.wake(promoted);
            next
        };
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = notified => {}
                }
            }
            None => notified.await,
        }
    }
}

/// Refreshes `workqueue_unfinished_work_seconds` and `..._longest_running_processor_seconds`.
async fn refresh_in_flight<K: QueueKey>(queue: Weak<Inner<K>>, first: Instant) {
    let mut ticks = tokio::time::interval_at(first, IN_FLIGHT_REFRESH);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = queue.upgrade() else { return };
        let state = inner.state.lock();
        if let Some(metrics) = state.metrics() {
            let (unfinished, longest) = state.in_flight_ages(Instant::now());
            metrics.in_flight(unfinished, longest);
        }
        if state.shutting_down && state.processing_is_empty() {
            return;
        }
    }
}
