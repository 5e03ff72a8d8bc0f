//! When node changes reach the load balancers: the first change of a burst is answered one batch
//! period (`--node-sync-batch-period`) after it, and every change until then is folded into that
//! answer. While the node set keeps changing, each next answer waits twice as long as the one
//! before (2, 4, 8, 16, 32 s ...) up to `--node-sync-max-batch-period` (default 60 s); once the
//! set has been still for one batch period, what is pending is answered and the period is back
//! to the batch period. So the first Node of a scale-up reaches every load balancer within the
//! period plus one pass, the last one within the period after the scale-up ends, and a burst of
//! any length costs each load balancer a handful of `UpdateLoadBalancer` calls: a 300 s scale-up,
//! nine. A period of zero answers every change at once (upstream behaviour).
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
    /// The batch period: the wait before the first answer of a burst, and the stillness that
    /// ends a burst.
    base: Duration,
    /// The longest wait between two answers while the set keeps changing.
    max: Duration,
    /// The wait after the last answer before the next one, while the burst goes on.
    period: Duration,
    /// The first change not answered yet.
    pending: Option<Instant>,
    /// The latest change seen.
    last_change: Option<Instant>,
    /// When the last answer was taken.
    last_answer: Option<Instant>,
}

impl Coalescer {
    /// Answers the first change of a burst `base` after it, then waits a doubling period, up to
    /// `max`, while changes keep coming. `max` shorter than `base` is taken as `base`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max: max.max(base),
            period: base,
            pending: None,
            last_change: None,
            last_answer: None,
        }
    }

    /// Records a node change at `now`.
    pub fn changed(&mut self, now: Instant) {
        if self.pending.is_none() && self.still_at(now) {
            // A new burst: its first change is answered one batch period after it.
            self.period = self.base;
        }
        self.pending.get_or_insert(now);
        self.last_change = Some(now);
    }

    /// Whether no change came in the batch period before `now`.
    fn still_at(&self, now: Instant) -> bool {
        self.last_change
            .is_none_or(|last| now.saturating_duration_since(last) >= self.base)
    }

    /// When the pending changes are due: `None` when nothing is pending; else the batch period
    /// after the first of them and the current period after the last answer, whichever is
    /// later, or as soon as the set has been still for one batch period.
    pub fn deadline(&self) -> Option<Instant> {
        let first = self.pending?;
        let mut scheduled = first + self.base;
        if let Some(answered) = self.last_answer {
            scheduled = scheduled.max(answered + self.period);
        }
        let still = self.last_change.map_or(scheduled, |last| last + self.base);
        Some(scheduled.min(still))
    }

    /// Takes the pending changes if they are due at `now`, returning when the first happened.
    /// The next answer then waits twice the period (up to the maximum), or the batch period
    /// again if the set has been still for one.
    pub fn take_due(&mut self, now: Instant) -> Option<Instant> {
        if self.deadline().is_none_or(|due| due > now) {
            return None;
        }
        self.period = if self.still_at(now) {
            self.base
        } else {
            (self.period * 2).min(self.max)
        };
        self.last_answer = Some(now);
        self.pending.take()
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
    /// A handle throttling with a batch period of `base`, doubling up to `max` while changes
    /// keep coming (see [`Coalescer::new`]).
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(Coalescer::new(base, max)),
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
    const MAX: Duration = Duration::from_secs(60);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn single_change_is_due_one_period_later() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(PERIOD, MAX);
        assert_eq!(c.deadline(), None);
        c.changed(t0);
        assert_eq!(c.deadline(), Some(t0 + PERIOD));
        assert_eq!(c.take_due(t0 + PERIOD - ms(1)), None);
        assert_eq!(c.take_due(t0 + PERIOD), Some(t0));
        assert_eq!(c.deadline(), None, "taken");
    }

    /// Runs `c` over changes at `changes` (offsets from a start, in order), answering each time
    /// it is due, and returns when each answer came and the first change it answered, as
    /// offsets from the start.
    fn answers(mut c: Coalescer, changes: &[Duration]) -> Vec<(Duration, Duration)> {
        let t0 = Instant::now();
        let mut out = Vec::new();
        let mut next = changes.iter().map(|d| t0 + *d).peekable();
        loop {
            match (next.peek().copied(), c.deadline()) {
                (None, None) => return out,
                (Some(change), due) if due.is_none_or(|due| change < due) => {
                    c.changed(change);
                    next.next();
                }
                (_, Some(due)) => {
                    let first = c.take_due(due).expect("due at its deadline");
                    out.push((due - t0, first - t0));
                }
                (_, None) => unreachable!("covered above"),
            }
        }
    }

    /// A change every `gap` from `start` for `count` changes.
    fn every(start: Duration, gap: Duration, count: u32) -> Vec<Duration> {
        (0..count).map(|i| start + gap * i).collect()
    }

    fn at_secs(answers: &[(Duration, Duration)]) -> Vec<f64> {
        answers.iter().map(|(at, _)| at.as_secs_f64()).collect()
    }

    #[test]
    fn a_long_burst_is_answered_at_a_doubling_period_then_at_its_end() {
        // 3,000 Nodes over 300 s, two changes each (join, then providerID): one every 50 ms.
        let changes = every(Duration::ZERO, ms(50), 6000);
        let answered = answers(Coalescer::new(PERIOD, MAX), &changes);
        assert_eq!(
            at_secs(&answered),
            [2.0, 6.0, 14.0, 30.0, 62.0, 122.0, 182.0, 242.0, 301.95],
            "{answered:?}"
        );
        // The first Node waits one period, not for the burst to end.
        assert_eq!(answered[0], (PERIOD, Duration::ZERO));
        // The last change is answered one period after it: the set was still that long.
        assert_eq!(
            answered.last().unwrap().0,
            *changes.last().unwrap() + PERIOD
        );
        // Nothing is answered twice and nothing is skipped: each answer takes the first
        // change after the one before.
        for pair in answered.windows(2) {
            assert!(
                pair[1].1 > pair[0].0 - ms(50) && pair[1].1 <= pair[0].0 + ms(50),
                "{pair:?}"
            );
        }
    }

    #[test]
    fn a_burst_of_any_length_costs_a_bounded_number_of_answers() {
        for (secs_long, at_most) in [(20, 5), (100, 7), (300, 9), (900, 19)] {
            let changes = every(Duration::ZERO, ms(100), secs_long * 10);
            let answered = answers(Coalescer::new(PERIOD, MAX), &changes);
            assert!(answered.len() <= at_most, "{secs_long} s: {answered:?}");
            // Never closer together than the batch period, never further apart than the cap.
            for pair in answered.windows(2) {
                let gap = pair[1].0 - pair[0].0;
                assert!(gap >= PERIOD && gap <= MAX, "{pair:?}");
            }
        }
    }

    #[test]
    fn the_period_resets_once_the_set_was_still_for_one_batch_period() {
        // A 20 s burst, 10 s of quiet, then one change.
        let mut changes = every(Duration::ZERO, ms(100), 200);
        changes.push(secs(30));
        let answered = answers(Coalescer::new(PERIOD, MAX), &changes);
        assert_eq!(
            at_secs(&answered),
            [2.0, 6.0, 14.0, 21.9, 32.0],
            "the burst's tail one period after its last change; the lone change one period after it"
        );
        assert_eq!(answered[4].1, secs(30));
    }

    #[test]
    fn changes_further_apart_than_the_period_are_each_answered_one_period_later() {
        let changes = every(Duration::ZERO, ms(2500), 20);
        let answered = answers(Coalescer::new(PERIOD, MAX), &changes);
        assert_eq!(answered.len(), 20);
        for ((at, first), change) in answered.iter().zip(&changes) {
            assert_eq!((*at, *first), (*change + PERIOD, *change));
        }
    }

    #[test]
    fn a_trickle_just_inside_the_period_is_answered_at_most_once_per_cap() {
        // A change every 1.9 s for an hour: never still for a period, so the cap rules.
        let changes = every(Duration::ZERO, ms(1900), 1900);
        let answered = answers(Coalescer::new(PERIOD, MAX), &changes);
        let gaps: Vec<Duration> = answered.windows(2).map(|p| p[1].0 - p[0].0).collect();
        assert_eq!(gaps[..5], [secs(4), secs(8), secs(16), secs(32), MAX]);
        // Then the cap, up to the tail one period after the last change.
        assert!(
            gaps[5..gaps.len() - 1].iter().all(|g| *g == MAX),
            "{gaps:?}"
        );
        // Every change is answered within the cap plus one period.
        for pair in answered.windows(2) {
            assert!(pair[1].0 - pair[1].1 <= MAX + PERIOD, "{pair:?}");
        }
    }

    #[test]
    fn a_cap_equal_to_the_period_answers_every_period() {
        // The throttle before the doubling: one answer per period for as long as the burst goes.
        let changes = every(Duration::ZERO, ms(20), 1000);
        let answered = answers(Coalescer::new(PERIOD, PERIOD), &changes);
        assert_eq!(
            at_secs(&answered),
            [2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0]
        );
    }

    #[test]
    fn zero_period_answers_at_once() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Duration::ZERO, MAX);
        c.changed(t0);
        assert_eq!(c.take_due(t0), Some(t0));
        c.changed(t0 + ms(1));
        assert_eq!(c.take_due(t0 + ms(1)), Some(t0 + ms(1)));
        c.changed(t0 + ms(1));
        assert_eq!(
            c.take_due(t0 + ms(1)),
            Some(t0 + ms(1)),
            "no doubling of zero"
        );
    }

    #[test]
    fn a_cap_below_the_period_is_the_period() {
        let answered = answers(
            Coalescer::new(PERIOD, ms(500)),
            &every(Duration::ZERO, ms(100), 100),
        );
        assert_eq!(at_secs(&answered), [2.0, 4.0, 6.0, 8.0, 10.0]);
    }

    /// The answers the task gave: when, and the first change each answered.
    type Answers = Arc<Mutex<Vec<(Instant, Instant)>>>;

    /// Spawns the answering task; returns the answers (when, first change) as they come.
    fn spawn_task(
        changes: &NodeChanges,
        stop: &CancellationToken,
    ) -> (Answers, tokio::task::JoinHandle<()>) {
        let answers = Arc::new(Mutex::new(Vec::new()));
        let task = {
            let (changes, answers, stop) = (changes.clone(), answers.clone(), stop.clone());
            tokio::spawn(async move {
                changes
                    .run(stop, |first| answers.lock().push((Instant::now(), first)))
                    .await
            })
        };
        (answers, task)
    }

    #[tokio::test(start_paused = true)]
    async fn the_task_answers_due_changes_on_the_clock() {
        let changes = NodeChanges::new(PERIOD, MAX);
        let stop = CancellationToken::new();
        let (answers, task) = spawn_task(&changes, &stop);
        let t0 = Instant::now();
        for _ in 0..5 {
            changes.changed();
            tokio::time::sleep(ms(600)).await;
        }
        // Changes at 0, 0.6, 1.2, 1.8 and 2.4 s: the first four answered at 2 s; the fifth is
        // still inside the burst, but the set is still from 2.4 s on, so 4.4 s.
        tokio::time::sleep(secs(10)).await;
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

    #[tokio::test(start_paused = true)]
    async fn the_task_doubles_the_period_through_a_burst_and_resets_after_it() {
        let changes = NodeChanges::new(PERIOD, MAX);
        let stop = CancellationToken::new();
        let (answers, task) = spawn_task(&changes, &stop);
        let t0 = Instant::now();
        // 200 s of a change every 100 ms.
        for _ in 0..2000 {
            changes.changed();
            tokio::time::sleep(ms(100)).await;
        }
        tokio::time::sleep(secs(30)).await;
        let at: Vec<Duration> = answers.lock().iter().map(|(at, _)| *at - t0).collect();
        assert_eq!(
            at,
            [2, 6, 14, 30, 62, 122, 182]
                .map(secs)
                .into_iter()
                .chain([ms(201_900)])
                .collect::<Vec<_>>()
        );
        // Still since: the next change starts a new burst, answered one period after it.
        let lone = Instant::now();
        changes.changed();
        tokio::time::sleep(PERIOD + ms(1)).await;
        assert_eq!(answers.lock().last(), Some(&(lone + PERIOD, lone)));
        stop.cancel();
        task.await.unwrap();
    }
}
