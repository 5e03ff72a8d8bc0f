//! The deletion guard against eventually consistent clouds (the safety difference from upstream):
//! a Node is deleted only after its instance was reported missing on `missing_checks` consecutive
//! monitor ticks spanning at least `grace_period`.
//!
//! Upstream deletes on the first "does not exist" answer. Clouds whose inventory API is eventually
//! consistent (EC2 `DescribeInstances`, kubernetes/kubernetes PR #127424; cloud-provider-aws PR
//! #1024) briefly report fresh or busy instances as missing, and a burst of joining nodes can be
//! deleted before the node controller initializes them (PR #124825). The guard applies equally to
//! Nodes that still carry the uninitialized taint.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// How sure the controller must be that an instance is gone before deleting its Node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeletionGuard {
    /// Consecutive "missing" answers needed (at least 1).
    pub missing_checks: u32,
    /// Minimum time between the first "missing" answer and the deletion.
    pub grace_period: Duration,
}

impl Default for DeletionGuard {
    /// Two consecutive ticks and 30 s: at the default 5 s monitor period, seven answers in a row.
    fn default() -> Self {
        Self {
            missing_checks: 2,
            grace_period: Duration::from_secs(30),
        }
    }
}

#[derive(Clone, Debug)]
struct Missing {
    uid: Option<String>,
    since: Instant,
    count: u32,
}

/// Remembers, per Node, since when and how often its instance has been reported missing.
#[derive(Debug, Default)]
pub struct MissingTracker {
    guard: DeletionGuard,
    missing: HashMap<String, Missing>,
}

impl MissingTracker {
    /// A tracker enforcing `guard`.
    pub fn new(guard: DeletionGuard) -> Self {
        Self {
            guard,
            missing: HashMap::new(),
        }
    }

    /// Records a "missing" answer for the Node `name`/`uid` at `now`; true when the Node may be
    /// deleted. A Node re-created under the same name (new UID) starts over.
    pub fn observe_missing(&mut self, name: &str, uid: Option<&str>, now: Instant) -> bool {
        let entry = self
            .missing
            .entry(name.to_string())
            .or_insert_with(|| Missing {
                uid: uid.map(String::from),
                since: now,
                count: 0,
            });
        if entry.uid.as_deref() != uid {
            *entry = Missing {
                uid: uid.map(String::from),
                since: now,
                count: 0,
            };
        }
        entry.count += 1;
        entry.count >= self.guard.missing_checks.max(1)
            && now.duration_since(entry.since) >= self.guard.grace_period
    }

    /// Forgets the Node: its instance was seen, it became Ready, or it was deleted. An error
    /// from the cloud is neither, and leaves the record as it is.
    pub fn forget(&mut self, name: &str) {
        self.missing.remove(name);
    }

    /// Drops records of Nodes no longer in the cache.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.missing.retain(|name, _| keep(name));
    }

    /// Number of Nodes currently suspected gone, for logs and tests.
    pub fn suspected(&self) -> usize {
        self.missing.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn tracker() -> MissingTracker {
        MissingTracker::new(DeletionGuard {
            missing_checks: 2,
            grace_period: 10 * S,
        })
    }

    #[test]
    fn needs_both_enough_answers_and_the_grace_period() {
        let mut t = tracker();
        let t0 = Instant::now();
        assert!(!t.observe_missing("n", Some("u"), t0));
        // Second answer, but too soon.
        assert!(!t.observe_missing("n", Some("u"), t0 + 5 * S));
        assert!(t.observe_missing("n", Some("u"), t0 + 10 * S));

        // One answer after a long time is not enough either.
        let mut t = tracker();
        assert!(!t.observe_missing("n", Some("u"), t0));
        let mut single = MissingTracker::new(DeletionGuard {
            missing_checks: 3,
            grace_period: Duration::ZERO,
        });
        assert!(!single.observe_missing("n", None, t0 + 100 * S));
        assert!(!single.observe_missing("n", None, t0 + 101 * S));
        assert!(single.observe_missing("n", None, t0 + 102 * S));
    }

    #[test]
    fn seeing_the_instance_resets_the_count() {
        let mut t = tracker();
        let t0 = Instant::now();
        assert!(!t.observe_missing("n", Some("u"), t0));
        t.forget("n");
        assert!(!t.observe_missing("n", Some("u"), t0 + 20 * S));
        assert!(t.observe_missing("n", Some("u"), t0 + 30 * S));
    }

    #[test]
    fn a_recreated_node_starts_over() {
        let mut t = tracker();
        let t0 = Instant::now();
        assert!(!t.observe_missing("n", Some("old"), t0));
        assert!(!t.observe_missing("n", Some("new"), t0 + 20 * S));
        assert!(t.observe_missing("n", Some("new"), t0 + 30 * S));
    }

    #[test]
    fn retain_drops_nodes_that_left_the_cache() {
        let mut t = tracker();
        let t0 = Instant::now();
        t.observe_missing("a", None, t0);
        t.observe_missing("b", None, t0);
        t.retain(|n| n == "a");
        assert_eq!(t.suspected(), 1);
    }
}
