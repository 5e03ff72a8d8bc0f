//! The queue's bookkeeping under one lock: the FIFO, the dirty and processing sets, and the delayed
//! entries. Everything here is synchronous and takes the current time as an argument, so the
//! client-go rules can be read (and model-tested) without any locking or waking concerns, which
//! live in [`super::queue`].

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::Hash;

use tokio::time::{Duration, Instant};

use super::cause::Cause;
use super::metrics::QueueMetrics;

/// How far in the future a delay that would overflow the clock is parked (tokio uses the same bound).
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// One `add_after` request waiting in the min-heap, ordered by ready time then by arrival.
struct Delayed<K> {
    ready: Instant,
    seq: u64,
    key: K,
}

impl<K> PartialEq for Delayed<K> {
    fn eq(&self, other: &Self) -> bool {
        self.ready == other.ready && self.seq == other.seq
    }
}
impl<K> Eq for Delayed<K> {}
impl<K> PartialOrd for Delayed<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K> Ord for Delayed<K> {
    // Reversed so that `BinaryHeap` (a max-heap) pops the earliest entry first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .ready
            .cmp(&self.ready)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// What `schedule` did, so the caller knows whom to wake.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Scheduled {
    /// The queue is shutting down; the request was dropped.
    Ignored,
    /// The delay had already passed; the key went through `add` (and was pushed if `true`).
    Added(bool),
    /// The key is waiting; `true` if its ready time is now the earliest, so the timer must re-arm.
    Waiting(bool),
}

/// A key that needs processing: when it was first added (when metrics are on), why, and whether
/// every add it absorbed was low priority (it then waits in the low tier).
struct Dirty {
    since: Option<Instant>,
    cause: Cause,
    low: bool,
}

/// A delayed key: its earliest ready time and the causes of every `add_after` it absorbed.
struct Waiting {
    ready: Instant,
    cause: Cause,
}

/// client-go's queue state: `queue` (FIFO), `dirty` (needs processing), `processing` (handed out),
/// plus the delaying queue's heap and per-key earliest ready time. Each dirty or delayed key also
/// carries the [`Cause`] of the adds it absorbed, handed out with the key.
///
/// A second FIFO, `low`, holds keys whose every add was low priority (re-verifications of what an
/// initial list, relist or resync delivered, as controller-runtime's priority queue): they are
/// handed out only when `queue` is empty. A normal add of a key waiting in `low` moves it to the
/// back of `queue`. Each dirty, not-processing key is in exactly one of the two FIFOs.
pub(super) struct State<K> {
    queue: VecDeque<K>,
    low: VecDeque<K>,
    /// Keys that need processing.
    dirty: HashMap<K, Dirty>,
    /// Keys handed out and not yet `done`; the value is the hand-out time when metrics are on.
    processing: HashMap<K, Option<Instant>>,
    /// Earliest ready time per delayed key; heap entries that disagree with it are stale.
    waiting: HashMap<K, Waiting>,
    heap: BinaryHeap<Delayed<K>>,
    seq: u64,
    pub(super) shutting_down: bool,
    pub(super) drain: bool,
    metrics: Option<QueueMetrics>,
}

impl<K: Clone + Eq + Hash> State<K> {
    pub(super) fn new(metrics: Option<QueueMetrics>) -> Self {
        Self {
            queue: VecDeque::new(),
            low: VecDeque::new(),
            dirty: HashMap::new(),
            processing: HashMap::new(),
            waiting: HashMap::new(),
            heap: BinaryHeap::new(),
            seq: 0,
            shutting_down: false,
            drain: false,
            metrics,
        }
    }

    fn stamp(&self) -> Option<Instant> {
        self.metrics.as_ref().map(|_| Instant::now())
    }

    /// client-go `Add`: returns `true` if the key was pushed onto the FIFO (one waiter should wake).
    /// A key already dirty absorbs `cause` instead.
    pub(super) fn add(&mut self, key: K, cause: Cause) -> bool {
        self.add_in_tier(key, cause, false)
    }

    /// [`Self::add`] in the tier `low` says; a normal add of a key waiting in the low tier
    /// promotes it, a low add never demotes a key.
    /// Whether `key` waits to be handed out or is being processed.
    pub(super) fn is_pending(&self, key: &K) -> bool {
        self.dirty.contains_key(key) || self.processing.contains_key(key)
    }

    pub(super) fn add_in_tier(&mut self, key: K, cause: Cause, low: bool) -> bool {
        if self.shutting_down {
            return false;
        }
        if let Some(dirty) = self.dirty.get_mut(&key) {
            dirty.cause.absorb(cause);
            if dirty.low && !low {
                dirty.low = false;
                if let Some(at) = self.low.iter().position(|k| *k == key) {
                    self.low.remove(at);
                    self.queue.push_back(key);
                }
            }
            return false;
        }
        let since = self.stamp();
        if let Some(m) = &self.metrics {
            m.added();
        }
        let dirty = Dirty { since, cause, low };
        if self.processing.contains_key(&key) {
            self.dirty.insert(key, dirty);
            return false;
        }
        self.dirty.insert(key.clone(), dirty);
        self.fifo(low).push_back(key);
        true
    }

    fn fifo(&mut self, low: bool) -> &mut VecDeque<K> {
        if low { &mut self.low } else { &mut self.queue }
    }

    /// client-go `Get` without the blocking: pops the head (of the low tier only when the normal
    /// FIFO is empty) and moves it from dirty to processing.
    pub(super) fn pop(&mut self) -> Option<(K, Cause)> {
        let key = self.queue.pop_front().or_else(|| self.low.pop_front())?;
        let (added, cause) = match self.dirty.remove(&key) {
            Some(dirty) => (dirty.since, dirty.cause),
            None => (None, Cause::default()),
        };
        let now = self.stamp();
        if let (Some(m), Some(now)) = (&self.metrics, now) {
            m.got(added.map(|t| now.saturating_duration_since(t)));
        }
        self.processing.insert(key.clone(), now);
        Some((key, cause))
    }

    /// client-go `Done`: returns `true` if the key was dirty and went back onto the FIFO.
    pub(super) fn done(&mut self, key: &K) -> bool {
        let Some(started) = self.processing.remove(key) else {
            return false;
        };
        if let (Some(m), Some(started)) = (&self.metrics, started) {
            m.finished(Instant::now().saturating_duration_since(started));
        }
        if let Some(dirty) = self.dirty.get(key) {
            let low = dirty.low;
            self.fifo(low).push_back(key.clone());
            return true;
        }
        self.shrink_if_sparse();
        false
    }

    /// Gives back memory after a burst: containers never shrink by themselves, so a queue that once
    /// held a full relist's keys would keep that capacity for the life of the process. Shrinking
    /// only below a quarter of capacity keeps the cost amortized O(1) per operation.
    fn shrink_if_sparse(&mut self) {
        const RETAINED: usize = 1024;
        fn sparse(len: usize, capacity: usize) -> bool {
            capacity > RETAINED && len.saturating_mul(4) < capacity
        }
        if sparse(self.queue.len(), self.queue.capacity()) {
            self.queue.shrink_to(self.queue.len() * 2);
        }
        if sparse(self.low.len(), self.low.capacity()) {
            self.low.shrink_to(self.low.len() * 2);
        }
        if sparse(self.dirty.len(), self.dirty.capacity()) {
            self.dirty.shrink_to(self.dirty.len() * 2);
        }
        if sparse(self.processing.len(), self.processing.capacity()) {
            self.processing.shrink_to(self.processing.len() * 2);
        }
        if sparse(self.waiting.len(), self.waiting.capacity()) {
            self.waiting.shrink_to(self.waiting.len() * 2);
        }
        if sparse(self.heap.len(), self.heap.capacity()) {
            self.heap.shrink_to(self.heap.len() * 2);
        }
    }

    /// Capacity of the FIFO, for tests that check memory is given back.
    #[cfg(test)]
    pub(super) fn fifo_capacity(&self) -> usize {
        self.queue.capacity()
    }

    /// The delaying queue's `AddAfter` once the delay is known to be positive or zero.
    pub(super) fn schedule(
        &mut self,
        key: K,
        delay: Duration,
        now: Instant,
        cause: Cause,
    ) -> Scheduled {
        if self.shutting_down {
            return Scheduled::Ignored;
        }
        if let Some(m) = &self.metrics {
            m.retried();
        }
        if delay.is_zero() {
            return Scheduled::Added(self.add(key, cause));
        }
        let ready = now.checked_add(delay).unwrap_or_else(|| now + FAR_FUTURE);
        match self.waiting.get_mut(&key) {
            // A later request never postpones an earlier one, but its cause is kept.
            Some(existing) if existing.ready <= ready => {
                existing.cause.absorb(cause);
                return Scheduled::Waiting(false);
            }
            Some(existing) => {
                existing.ready = ready;
                existing.cause.absorb(cause);
            }
            None => {
                self.waiting.insert(key.clone(), Waiting { ready, cause });
            }
        }
        let earliest = self.heap.peek().is_none_or(|top| ready < top.ready);
        self.seq += 1;
        self.heap.push(Delayed {
            ready,
            seq: self.seq,
            key,
        });
        Scheduled::Waiting(earliest)
    }

    /// Moves every delayed key whose time has come into the queue, earliest first; returns how many
    /// were pushed onto the FIFO (that many waiters should wake).
    pub(super) fn promote_due(&mut self, now: Instant) -> usize {
        let mut pushed = 0;
        while self.heap.peek().is_some_and(|top| top.ready <= now) {
            let Some(entry) = self.heap.pop() else { break };
            if self.waiting.get(&entry.key).map(|w| w.ready) != Some(entry.ready) {
                continue; // superseded by an earlier request for the same key
            }
            let Some(waiting) = self.waiting.remove(&entry.key) else {
                continue;
            };
            if self.add(entry.key, waiting.cause) {
                pushed += 1;
            }
        }
        pushed
    }

    /// Promotes due keys only when some are delayed, so the common path reads no clock.
    pub(super) fn promote_if_delayed(&mut self) -> usize {
        if self.heap.is_empty() {
            0
        } else {
            self.promote_due(Instant::now())
        }
    }

    /// When the timer must next wake (possibly for a stale entry, which is harmless).
    pub(super) fn next_ready(&self) -> Option<Instant> {
        self.heap.peek().map(|top| top.ready)
    }

    /// Sets the shutdown flags and discards delayed keys, as client-go's delaying queue does.
    pub(super) fn shut_down(&mut self, drain: bool) {
        self.shutting_down = true;
        self.drain = drain;
        self.heap.clear();
        self.waiting.clear();
    }

    pub(super) fn len(&self) -> usize {
        self.queue.len() + self.low.len()
    }

    pub(super) fn processing_is_empty(&self) -> bool {
        self.processing.is_empty()
    }

    /// Sum and maximum age of the in-flight keys, for the unfinished/longest-running gauges.
    pub(super) fn in_flight_ages(&self, now: Instant) -> (Duration, Duration) {
        self.processing
            .values()
            .flatten()
            .map(|t| now.saturating_duration_since(*t))
            .fold((Duration::ZERO, Duration::ZERO), |(sum, max), age| {
                (sum + age, max.max(age))
            })
    }

    pub(super) fn metrics(&self) -> Option<&QueueMetrics> {
        self.metrics.as_ref()
    }
}

#[cfg(test)]
mod shrink_tests {
    use super::{Cause, State};

    #[test]
    fn a_drained_burst_gives_its_memory_back() {
        let mut state = State::<u64>::new(None);
        for key in 0..20_000 {
            state.add(key, Cause::default());
        }
        let burst = state.fifo_capacity();
        assert!(burst >= 20_000);
        while let Some((key, _)) = state.pop() {
            state.done(&key);
        }
        assert!(
            state.fifo_capacity() <= 2048,
            "capacity {} kept after draining a burst of {burst}",
            state.fifo_capacity()
        );
        // Still a working queue afterwards.
        assert!(state.add(7, Cause::default()));
        assert_eq!(state.pop(), Some((7, Cause::default())));
    }
}
