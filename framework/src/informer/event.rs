//! Owns the notifications an informer hands to its subscribers: [`Event`] and the
//! [`EventHandler`] trait controllers implement to receive them.

use std::sync::Arc;

/// What happened to one cached object; the unit every handler receives, mirroring client-go's
/// `OnAdd` / `OnUpdate` / `OnDelete` so upstream controller logic ports one to one.
#[derive(Debug)]
pub enum Event<K> {
    /// The object appeared: initial list, a watch ADDED, a relist that found it, or the replay
    /// a late handler receives.
    Added(Arc<K>),
    /// The object changed, or was re-delivered by a resync or relist (then `old` and `new` are the
    /// same object: compare resourceVersions, or `Arc::ptr_eq`, to skip no-op updates).
    Updated {
        /// State before the change, as last cached.
        old: Arc<K>,
        /// State after the change, as now cached.
        new: Arc<K>,
    },
    /// The object is gone. Carries the final state from the watch, or, for deletes discovered by
    /// a relist, the last state the cache knew (client-go's `DeletedFinalStateUnknown`).
    Deleted(Arc<K>),
}

impl<K> Clone for Event<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Added(obj) => Self::Added(Arc::clone(obj)),
            Self::Updated { old, new } => Self::Updated {
                old: Arc::clone(old),
                new: Arc::clone(new),
            },
            Self::Deleted(obj) => Self::Deleted(Arc::clone(obj)),
        }
    }
}

impl<K> Event<K> {
    /// The object's most recent state, so a handler that only maps objects to keys needs no match.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Added(obj) | Self::Deleted(obj) => obj,
            Self::Updated { new, .. } => new,
        }
    }
}

/// Receives an informer's events on the handler's own task, in order.
///
/// Handlers should only compute keys and enqueue them (as upstream's do); a handler that blocks
/// delays only its own events, but it also occupies a runtime worker thread while it blocks.
pub trait EventHandler<K>: Send + 'static {
    /// Called once per event, in the order the informer saw them.
    fn on_event(&mut self, event: &Event<K>);
}

impl<K, F> EventHandler<K> for F
where
    F: FnMut(&Event<K>) + Send + 'static,
{
    fn on_event(&mut self, event: &Event<K>) {
        self(event)
    }
}
