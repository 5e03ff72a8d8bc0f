//! Puts back on a sharded controller's queue every key the replica gains, whenever its ring's
//! admissible set changes: what [`super::ShardLayer`] dropped while the key was another member's
//! (or while nothing was admissible) is re-verified here once it is this replica's.
//!
//! Gained keys go to the queue's low tier, behind the keys fresh events bring, as the initial
//! list's keys do after a takeover.

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
        let mut gained = 0usize;
        for obj in store.list() {
            if now.gained_since(&before, &ObjectKey::from_object(&*obj))
                && let Some(key) = select(&obj)
            {
                queue.add_low_priority(key);
                gained += 1;
            }
        }
        if gained > 0 {
            tracing::info!(
                ring = ring.name(),
                gained,
                "re-verifying the keys this replica gained"
            );
        }
        before = now;
    }
}
