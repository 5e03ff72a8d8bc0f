//! Puts back on a sharded controller's queue every key the replica gains, whenever its ring's
//! admissible set changes: what [`super::ShardLayer`] dropped while the key was another member's
//! (or while nothing was admissible) is re-verified here once it is this replica's.
//!
//! Gained keys go to the queue's low tier, behind the keys fresh events bring, as the initial
//! list's keys do after a takeover; except those refused lately with an event (see
//! `missed.rs`): nobody may have served it, so they go ahead, as a fresh event would.
//!
//! A gained key refused lately is queued again even if a worker still holds the refused
//! hand-out. Any other gained key already waiting or running is not added again: a refusal
//! before the change would be in the missed record (noted under the lock that changes
//! ownership), so a running one was, or will be, admitted after the change, and that reconcile
//! verifies it.

use tokio_util::sync::CancellationToken;

use super::handover::{Ownership, Ring};
use crate::informer::{InformerResource, ObjectKey, Store};
use crate::workqueue::{QueueKey, WorkQueue};

/// Until `stop`: on each change of `ring`, adds to `queue` the key `select` gives for every
/// object of `store` this replica gained since the previous change (all it owns, the first
/// time). `select` returns `None` for objects the controller has nothing to do for, and the key
/// it must return is the one the controller's [`super::ShardLayer`] maps to the same object.
pub async fn requeue_gained<T, K>(
    ring: Ring,
    store: Store<T>,
    queue: WorkQueue<K>,
    select: impl Fn(&T) -> Option<K>,
    stop: CancellationToken,
) where
    T: InformerResource,
    K: QueueKey,
{
    let mut changes = ring.changes();
    let mut before = Ownership::default();
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
        let now = ring.ownership();
        // Taken after `now`: a refusal noted before the change is in it.
        let missed = ring.recently_missed();
        let (mut gained, mut fresh) = (0usize, 0usize);
        for obj in store.list() {
            let object_key = ObjectKey::from_object(&*obj);
            if now.gained_since(&before, &object_key)
                && let Some(key) = select(&obj)
            {
                match missed.get(&object_key) {
                    Some(true) => {
                        queue.add(key);
                        fresh += 1;
                    }
                    // The refused hand-out may still be with a worker: queue it again anyway.
                    Some(false) => queue.add_low_priority(key),
                    None => {
                        queue.add_low_priority_unless_pending(key);
                    }
                }
                gained += 1;
            }
        }
        if gained > 0 {
            tracing::info!(
                ring = ring.name(),
                gained,
                with_unserved_events = fresh,
                "re-verifying the keys this replica gained"
            );
        }
        before = now;
    }
}
