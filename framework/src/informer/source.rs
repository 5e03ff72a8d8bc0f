//! [`EventSource`]: where an informer event came from, a live watch change or a re-delivery of
//! the cache, as handlers registered with [`super::WithSource`] see it.

/// Where an event came from; the span's `event.source`, so a trace tells a live change from a
/// cache re-delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventSource {
    /// A watch ADDED, MODIFIED or DELETED.
    Watch,
    /// The diff of the first complete list.
    List,
    /// The diff of a later list (after a 410 Gone or a reconnect).
    Relist,
    /// A handler's periodic re-delivery of the cache.
    Resync,
    /// The cache replayed to a handler registered after start.
    Replay,
}

impl EventSource {
    /// True for a live change from the watch; false for a re-delivery of what the cache holds
    /// (initial list, relist, resync, replay: client-go's `isInInitialList` and resyncs), whose
    /// keys a controller re-verifies after every fresh one (see
    /// [`crate::workqueue::WorkQueue::add_from`]).
    pub fn is_fresh(self) -> bool {
        self == EventSource::Watch
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventSource::Watch => "watch",
            EventSource::List => "list",
            EventSource::Relist => "relist",
            EventSource::Resync => "resync",
            EventSource::Replay => "replay",
        }
    }
}
