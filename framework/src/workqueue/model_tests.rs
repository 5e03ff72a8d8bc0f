//! Model-based property test: random interleavings of add / get / done / add_after / time passing /
//! shutdown, checked step by step against a deliberately naive reference model of client-go's
//! rules (plain sets and a sorted list, no heap, no locking), plus the low-priority tier: a key
//! whose every add was `add_low_priority` waits behind every normal key until a normal add
//! promotes it.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use futures::FutureExt;
use proptest::prelude::*;

use super::{ItemExponential, WorkQueue};

#[derive(Clone, Debug)]
enum Op {
    Add(u8),
    AddLow(u8),
    AddAfter(u8, u64),
    Get,
    /// Completes the n-th (mod count) key currently processing.
    Done(usize),
    Advance(u64),
    Len,
    Shutdown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..6).prop_map(Op::Add),
        3 => (0u8..6).prop_map(Op::AddLow),
        3 => (0u8..6, 0u64..40).prop_map(|(k, d)| Op::AddAfter(k, d)),
        4 => Just(Op::Get),
        3 => (0usize..8).prop_map(Op::Done),
        2 => (0u64..30).prop_map(Op::Advance),
        1 => Just(Op::Len),
        1 => Just(Op::Shutdown),
    ]
}

/// The reference: client-go's queue written as directly as possible.
#[derive(Default)]
struct Model {
    now: u64,
    seq: u64,
    queue: VecDeque<u8>,
    /// The low tier's FIFO, and the dirty keys that belong to it.
    low: VecDeque<u8>,
    low_dirty: HashSet<u8>,
    dirty: HashSet<u8>,
    processing: Vec<u8>,
    /// (ready, seq, key): the live delayed entry of each waiting key.
    waiting: Vec<(u64, u64, u8)>,
    shutting_down: bool,
}

impl Model {
    fn add(&mut self, k: u8) {
        if self.shutting_down {
            return;
        }
        if !self.dirty.insert(k) {
            if self.low_dirty.remove(&k) && self.low.contains(&k) {
                self.low.retain(|l| *l != k);
                self.queue.push_back(k);
            }
            return;
        }
        if !self.processing.contains(&k) {
            self.queue.push_back(k);
        }
    }

    fn add_low(&mut self, k: u8) {
        if self.shutting_down || !self.dirty.insert(k) {
            return;
        }
        self.low_dirty.insert(k);
        if !self.processing.contains(&k) {
            self.low.push_back(k);
        }
    }

    fn len(&self) -> usize {
        self.queue.len() + self.low.len()
    }

    fn promote(&mut self) {
        self.waiting.sort();
        while let Some(&(ready, _, k)) = self.waiting.first() {
            if ready > self.now {
                break;
            }
            self.waiting.remove(0);
            self.add(k);
        }
    }

    fn add_after(&mut self, k: u8, d: u64) {
        if self.shutting_down {
            return;
        }
        if d == 0 {
            return self.add(k);
        }
        let ready = self.now + d;
        match self.waiting.iter_mut().find(|(_, _, key)| *key == k) {
            Some(entry) if entry.0 <= ready => {}
            Some(entry) => {
                self.seq += 1;
                *entry = (ready, self.seq, k);
            }
            None => {
                self.seq += 1;
                self.waiting.push((ready, self.seq, k));
            }
        }
    }

    /// `None` = `get` would block; `Some(None)` = shut down and empty.
    fn get(&mut self) -> Option<Option<u8>> {
        match self.queue.pop_front().or_else(|| self.low.pop_front()) {
            Some(k) => {
                self.dirty.remove(&k);
                self.low_dirty.remove(&k);
                self.processing.push(k);
                Some(Some(k))
            }
            None if self.shutting_down => Some(None),
            None => None,
        }
    }

    fn done(&mut self, k: u8) {
        self.processing.retain(|p| *p != k);
        if self.low_dirty.contains(&k) {
            self.low.push_back(k);
        } else if self.dirty.contains(&k) {
            self.queue.push_back(k);
        }
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    rt.block_on(async {
        let q: WorkQueue<u8> = WorkQueue::new("model", ItemExponential::default());
        let mut m = Model::default();
        for op in ops {
            m.promote();
            match op {
                Op::Add(k) => {
                    q.add(k);
                    m.add(k);
                }
                Op::AddLow(k) => {
                    q.add_low_priority(k);
                    m.add_low(k);
                }
                Op::AddAfter(k, d) => {
                    q.add_after(k, Duration::from_millis(d));
                    m.add_after(k, d);
                }
                Op::Get => {
                    let got = q.get().now_or_never();
                    let expected = m.get();
                    prop_assert_eq!(got, expected);
                }
                Op::Done(n) => {
                    if m.processing.is_empty() {
                        continue;
                    }
                    let k = m.processing[n % m.processing.len()];
                    q.done(&k);
                    m.done(k);
                }
                Op::Advance(d) => {
                    tokio::time::advance(Duration::from_millis(d)).await;
                    m.now += d;
                }
                Op::Len => {
                    prop_assert_eq!(q.len(), m.len());
                }
                Op::Shutdown => {
                    q.shutdown();
                    m.shutting_down = true;
                    m.waiting.clear();
                }
            }
        }
        m.promote();
        prop_assert_eq!(q.len(), m.len());
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn queue_matches_client_go_model(ops in proptest::collection::vec(op(), 1..120)) {
        run(ops)?;
    }
}
