//! Coalescing of node changes before they reach the load balancers: a change is answered once
//! node changes have been quiet for the batch period (`--node-sync-batch-period`), and a burst
//! that never goes quiet is answered at least every [`MAX_BURST_HOLD`]. A scale-up of N nodes so
//! costs each load balancer one or two `UpdateLoadBalancer` calls instead of up to N, while a
//! single change waits exactly one period. A period of zero answers every change at once
//! (upstream behaviour).
//!
//! [`Coalescer`] is the decision on a clock, without I/O; [`NodeChanges`] is the handle the Node
//! event handler pokes and the task that fans each answered burst out.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Longest a burst of node changes is held back while it keeps going, so continuous churn still
/// reaches the load balancers.
pub const MAX_BURST_HOLD: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Burst {
    first: Instant,
    last: Instant,
}

/// When the node changes seen so far are due to be answered.
#[derive(Debug)]
pub struct Coalescer {
    period: Duration,
    max_hold: Duration,
    pending: Option<Burst>,
}

impl Coalescer {
    /// Waits for `period` of quiet, holding a burst at most `max(period, MAX_BURST_HOLD)`.
    pub fn new(period: Duration) -> Self {
        Self {
            period,
            max_hold: MAX_BURST_HOLD.max(period),
            pending: None,
        }
    }

    /// Records a node change at `now`.
    pub fn changed(&mut self, now: Instant) {
        match &mut self.pending {
            Some(burst) => burst.last = now,
            None => {
                self.pending = Some(Burst {
                    first: now,
                    last: now,
                })
            }
        }
    }

    /// When the pending changes are due: `period` after the last one, but no later than
    /// `max_hold` after the first; `None` when nothing is pending.
    pub fn deadline(&self) -> Option<Instant> {
        self.pending
            .map(|b| (b.last + self.period).min(b.first + self.max_hold))
    }

    /// Takes the pending burst if it is due at `now`, returning when its first change happened.
    pub fn take_due(&mut self, now: Instant) -> Option<Instant> {
        let due = self.deadline().is_some_and(|d| d <= now);
        if due {
            self.pending.take().map(|b| b.first)
        } else {
            None
        }
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
    /// A handle coalescing with `period` (see [`Coalescer::new`]).
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

    /// Calls `answer(first_change)` each time a burst is due, until `shutdown`.
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

    #[test]
    fn a_burst_is_answered_once_it_goes_quiet() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(PERIOD);
        // 1,000 changes 10 ms apart: 10 s of churn, never quiet for a period.
        for i in 0..1000 {
            let now = t0 + ms(10 * i);
            assert_eq!(c.take_due(now), None, "change {i}");
            c.changed(now);
        }
        let last = t0 + ms(10 * 999);
        assert_eq!(c.deadline(), Some(last + PERIOD));
        assert_eq!(c.take_due(last + PERIOD), Some(t0));
    }

    #[test]
    fn endless_churn_is_answered_every_max_hold() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(PERIOD);
        let mut answered = Vec::new();
        // 95 s of a change every 500 ms.
        for i in 0..190u64 {
            let now = t0 + ms(500 * i);
            if let Some(first) = c.take_due(now) {
                answered.push((now - t0, first - t0));
            }
            c.changed(now);
        }
        let secs: Vec<u64> = answered.iter().map(|(at, _)| at.as_secs()).collect();
        assert_eq!(secs, [30, 60, 90], "{answered:?}");
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
    async fn the_task_answers_due_bursts_on_the_clock() {
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
            tokio::time::sleep(ms(500)).await;
        }
        // Last change at t0 + 2 s: answered at t0 + 4 s, once.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(*answers.lock(), [(t0 + ms(4000), t0)]);
        changes.changed();
        tokio::time::sleep(PERIOD - ms(1)).await;
        assert_eq!(answers.lock().len(), 1, "not before one period");
        tokio::time::sleep(ms(2)).await;
        assert_eq!(answers.lock().len(), 2);
        stop.cancel();
        task.await.unwrap();
    }
}
