//! Owns the notifications an informer hands to its subscribers: [`Event`] and the
//! [`EventHandler`] trait controllers implement to receive them.

use std::sync::Arc;

use super::source::EventSource;

/// What happened to one cached object; the unit every handler receives, mirroring client-go's
/// `OnAdd` / `OnUpdate` / `OnDelete` so upstream controller logic ports one to one.
#[derive(Debug)]
pub enum Event<K: ?Sized> {
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

impl<K: ?Sized> Clone for Event<K> {
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

impl<K: ?Sized> Event<K> {
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
pub trait EventHandler<K: ?Sized>: Send + 'static {
    /// Called once per event, in the order the informer saw them.
    fn on_event(&mut self, event: &Event<K>);

    /// Called instead of [`Self::on_event`] with where the event came from (a live watch change
    /// or a re-delivery of the cache: initial list, relist, resync, replay), as client-go's
    /// `OnAdd(obj, isInInitialList)`. The default ignores the source.
    fn on_event_from(&mut self, event: &Event<K>, source: EventSource) {
        let _ = source;
        self.on_event(event);
    }
}

/// A handler closure that also receives the [`EventSource`] of each event, e.g. to queue keys of
/// re-delivered objects at low priority with [`crate::workqueue::WorkQueue::add_from`]:
/// `informer.add_handler(WithSource(move |e: &Event<Node>, source| q.add_from(key(e), source)))`.
pub struct WithSource<F>(pub F);

impl<K, F> EventHandler<K> for WithSource<F>
where
    F: FnMut(&Event<K>, EventSource) + Send + 'static,
{
    fn on_event(&mut self, event: &Event<K>) {
        (self.0)(event, EventSource::Watch)
    }

    fn on_event_from(&mut self, event: &Event<K>, source: EventSource) {
        (self.0)(event, source)
    }
}

impl<K, F> EventHandler<K> for F
where
    F: FnMut(&Event<K>) + Send + 'static,
{
    fn on_event(&mut self, event: &Event<K>) {
        self(event)
    }
}
