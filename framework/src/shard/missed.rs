//! The keys a replica refused because they were not its own to reconcile, remembered for a
//! while with whether the refused hand-out carried an event. If one becomes this replica's (its
//! owner died, a handover moved it), [`super::requeue_gained`] queues it again even if a worker
//! still holds the refused hand-out, and a key refused with an event goes ahead of those that
//! are only re-verified: nobody may have served that event.
//!
//! Without this, a Service created while its owner was dead waited behind the re-verification of
//! every load balancer the dead owner left: 14 s after a `kill -9` for 90 new Services among 300
//! (lease 2 s), where a fresh event should be served first.

use std::collections::{HashMap, VecDeque};
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
    /// (when, key, whether the refused hand-out carried an event), oldest first.
    keys: Mutex<VecDeque<(Instant, ObjectKey, bool)>>,
}

impl Missed {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            keys: Mutex::new(VecDeque::new()),
        }
    }

    /// Records that a hand-out of `key` was refused now; `fresh`: it carried an event.
    pub fn note(&self, key: &ObjectKey, fresh: bool) {
        let now = Instant::now();
        let mut keys = self.keys.lock();
        Self::prune(&mut keys, now, self.window);
        if keys.len() >= CAPACITY {
            keys.pop_front();
        }
        keys.push_back((now, key.clone(), fresh));
    }

    /// The keys refused within the window, each with whether any of those refusals carried an
    /// event.
    pub fn recent(&self) -> HashMap<ObjectKey, bool> {
        let mut keys = self.keys.lock();
        Self::prune(&mut keys, Instant::now(), self.window);
        let mut recent = HashMap::new();
        for (_, key, fresh) in keys.iter() {
            *recent.entry(key.clone()).or_insert(false) |= *fresh;
        }
        recent
    }

    fn prune(keys: &mut VecDeque<(Instant, ObjectKey, bool)>, now: Instant, window: Duration) {
        while keys.front().is_some_and(|(at, _, _)| *at + window <= now) {
            keys.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_refused_key_is_remembered_for_the_window_only_and_fresh_if_any_refusal_was() {
        let missed = Missed::new(Duration::from_secs(4));
        let (a, b) = (
            ObjectKey::namespaced("ns", "a"),
            ObjectKey::namespaced("ns", "b"),
        );
        missed.note(&a, false);
        tokio::time::sleep(Duration::from_secs(3)).await;
        missed.note(&b, true);
        missed.note(&b, false);
        assert_eq!(
            missed.recent(),
            HashMap::from([(a.clone(), false), (b.clone(), true)])
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(missed.recent(), HashMap::from([(b, true)]));
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(missed.recent().is_empty());
        assert!(missed.keys.lock().is_empty(), "pruned, not only filtered");
    }
}
