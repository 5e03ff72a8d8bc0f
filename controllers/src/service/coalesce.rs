//! Throttling of node changes before they reach the load balancers: a change is answered one
//! batch period (`--node-sync-batch-period`) after it happened, and every later change that comes
//! before that answer is folded into it. A change so reaches every load balancer within the period
//! even while a burst goes on, and a burst of any length costs each load balancer at most one
//! `UpdateLoadBalancer` per period: a 20 s scale-up at 2 s, about ten. A period of zero answers
//! every change at once (upstream behaviour).
//!
//! [`Coalescer`] is the decision on a clock, without I/O; [`NodeChanges`] is the handle the Node
//! event handler pokes and the task that fans each answer out.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// When the node changes seen so far are due to be answered.
#[derive(Debug)]
pub struct Coalescer {
    period: Duration,
    /// The first change not answered yet.
    pending: Option<Instant>,
}

impl Coalescer {
    /// Answers each change `period` after it, folding the changes in between.
    pub fn new(period: Duration) -> Self {
        Self {
            period,
            pending: None,
        }
    }

    /// Records a node change at `now`.
    pub fn changed(&mut self, now: Instant) {
        self.pending.get_or_insert(now);
    }

    /// When the pending changes are due: `period` after the first of them; `None` when nothing
    /// is pending.
    pub fn deadline(&self) -> Option<Instant> {
        self.pending.map(|first| first + self.period)
    }

    /// Takes the pending changes if they are due at `now`, returning when the first happened.
    pub fn take_due(&mut self, now: Instant) -> Option<Instant> {
        let due = self.deadline().is_some_and(|d| d <= now);
        if due { self.pending.take() } else { None }
    }
}

/// The shared handle: [`NodeChanges::changed`] from the Node event handler (never blocks),
/// [`NodeChanges::run`] as the task that answers due bursts.
#[derive(Clone)]
pub struct NodeChanges {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<Coalescer>,
    wake: Notify,
}

impl NodeChanges {
    /// A handle throttling with `period` (see [`Coalescer::new`]).
    pub fn new(period: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(Coalescer::new(period)),
                wake: Notify::new(),
            }),
        }
    }

    /// Records a node change that should reach the load balancers.
    pub fn changed(&self) {
        self.inner.state.lock().changed(Instant::now());
        self.inner.wake.notify_one();
    }

    /// Calls `answer(first_change)` each time changes are due, until `shutdown`.
    pub async fn run(&self, shutdown: CancellationToken, mut answer: impl FnMut(Instant)) {
        loop {
            let deadline = self.inner.state.lock().deadline();
            let due = async move {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                _ = due => {
                    let taken = self.inner.state.lock().take_due(Instant::now());
                    if let Some(first) = taken {
                        answer(first);
                    }
                }
                // A new change may move the deadline: look again.
                _ = self.inner.wake.notified() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_secs(2);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn single_change_is_due_one_period_later() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(PERIOD);
        assert_eq!(c.deadline(), None);
        c.changed(t0);
        assert_eq!(c.deadline(), Some(t0 + PERIOD));
        assert_eq!(c.take_due(t0 + PERIOD - ms(1)), None);
        assert_eq!(c.take_due(t0 + PERIOD), Some(t0));
        assert_eq!(c.deadline(), None, "taken");
    }

    /// Feeds a change every `gap` for `count` changes and returns when each answer came and
    /// which first change it answered.
    fn churn(period: Duration, gap: Duration, count: u64) -> Vec<(Duration, Duration)> {
        let t0 = Instant::now();
        let mut c = Coalescer::new(period);
        let mut answered = Vec::new();
        for i in 0..count {
            let now = t0 + gap * i as u32;
            if let Some(first) = c.take_due(now) {
                answered.push((now - t0, first - t0));
            }
            c.changed(now);
        }
        let last = c.deadline().expect("the last change is pending");
        answered.push((last - t0, c.take_due(last).expect("due") - t0));
        answered
    }

    #[test]
    fn a_long_burst_is_answered_every_period_not_after_it_ends() {
        // 1,000 changes 20 ms apart: a 20 s scale-up.
        let answered = churn(PERIOD, ms(20), 1000);
        let at: Vec<u64> = answered.iter().map(|(at, _)| at.as_secs()).collect();
        assert_eq!(at, [2, 4, 6, 8, 10, 12, 14, 16, 18, 20], "{answered:?}");
        // The first Node is answered one period after it joined, not after the burst.
        assert_eq!(answered[0], (PERIOD, Duration::ZERO));
        // Every change waited at most one period (plus one gap of the sampling here).
        for pair in answered.windows(2) {
            let (prev_at, _) = pair[0];
            let (at, first) = pair[1];
            assert!(
                first >= prev_at && at - first <= PERIOD + ms(20),
                "{pair:?}"
            );
        }
    }

    #[test]
    fn endless_churn_is_answered_once_per_period() {
        // 95 s of a change every 500 ms: an answer every 2 s, never more often.
        let answered = churn(PERIOD, ms(500), 190);
        assert_eq!(answered.len(), 48, "{answered:?}");
        for pair in answered.windows(2) {
            assert!(pair[1].0 - pair[0].0 >= PERIOD, "{pair:?}");
        }
    }

    #[test]
    fn zero_period_answers_at_once() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Duration::ZERO);
        c.changed(t0);
        assert_eq!(c.take_due(t0), Some(t0));
        c.changed(t0 + ms(1));
        assert_eq!(c.take_due(t0 + ms(1)), Some(t0 + ms(1)));
    }

    #[tokio::test(start_paused = true)]
    async fn the_task_answers_due_changes_on_the_clock() {
        let changes = NodeChanges::new(PERIOD);
        let answers = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let t0 = Instant::now();
        let task = {
            let (changes, answers, stop) = (changes.clone(), answers.clone(), stop.clone());
            tokio::spawn(async move {
                changes
                    .run(stop, |first| answers.lock().push((Instant::now(), first)))
                    .await
            })
        };
        for _ in 0..5 {
            changes.changed();
            tokio::time::sleep(ms(600)).await;
        }
        // Changes at 0, 0.6, 1.2, 1.8 and 2.4 s: the first four answered at 2 s, the last at 4.4 s.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(
            *answers.lock(),
            [(t0 + PERIOD, t0), (t0 + ms(4400), t0 + ms(2400))]
        );
        changes.changed();
        tokio::time::sleep(PERIOD - ms(1)).await;
        assert_eq!(answers.lock().len(), 2, "not before one period");
        tokio::time::sleep(ms(2)).await;
        assert_eq!(answers.lock().len(), 3);
        stop.cancel();
        task.await.unwrap();
    }
}
