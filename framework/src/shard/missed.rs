//! The keys a replica dropped for an event while they were not its own to reconcile, remembered
//! for a while: if one becomes this replica's (its owner died, a handover moved it), the event
//! was seen by nobody, so [`super::requeue_gained`] puts it ahead of the keys that are only
//! re-verified.
//!
//! Without this, a Service created while its owner was dead waited behind the re-verification of
//! every load balancer the dead owner left: 14 s after a `kill -9` for 90 new Services among 300
//! (lease 2 s), where a fresh event should be served first.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::informer::ObjectKey;

/// How many dropped keys are kept at most, newest last; beyond it the oldest go first (they are
/// then re-verified at low priority, as before this record existed).
const CAPACITY: usize = 100_000;

/// See the [module docs](self).
pub(crate) struct Missed {
    /// How long a dropped key is remembered: long enough to cover a dead owner's Lease expiring
    /// and the handover after it.
    window: Duration,
    keys: Mutex<VecDeque<(Instant, ObjectKey)>>,
}

impl Missed {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            keys: Mutex::new(VecDeque::new()),
        }
    }

    /// Records that an event for `key` was dropped now.
    pub fn note(&self, key: &ObjectKey) {
        let now = Instant::now();
        let mut keys = self.keys.lock();
        Self::prune(&mut keys, now, self.window);
        if keys.len() >= CAPACITY {
            keys.pop_front();
        }
        keys.push_back((now, key.clone()));
    }

    /// The keys dropped within the window.
    pub fn recent(&self) -> HashSet<ObjectKey> {
        let mut keys = self.keys.lock();
        Self::prune(&mut keys, Instant::now(), self.window);
        keys.iter().map(|(_, k)| k.clone()).collect()
    }

    fn prune(keys: &mut VecDeque<(Instant, ObjectKey)>, now: Instant, window: Duration) {
        while keys.front().is_some_and(|(at, _)| *at + window <= now) {
            keys.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_dropped_key_is_remembered_for_the_window_only() {
        let missed = Missed::new(Duration::from_secs(4));
        let (a, b) = (
            ObjectKey::namespaced("ns", "a"),
            ObjectKey::namespaced("ns", "b"),
        );
        missed.note(&a);
        tokio::time::sleep(Duration::from_secs(3)).await;
        missed.note(&b);
        missed.note(&b);
        assert_eq!(missed.recent(), HashSet::from([a.clone(), b.clone()]));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(missed.recent(), HashSet::from([b]));
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(missed.recent().is_empty());
        assert!(missed.keys.lock().is_empty(), "pruned, not only filtered");
    }
}
