//! A watcher's backlog: the events the store has handed it that its connection has not taken
//! yet, bounded in events and in bytes (their watch frames). The events are the store's own,
//! shared by every watcher and the history, so the bytes bound also bounds what all stalled
//! watchers together keep alive: each backlog is a run of the latest events. A watcher about to
//! go past either bound has fallen behind, and the store closes it, as kube-apiserver closes a
//! watcher whose buffer is full: its stream ends without an ERROR event, and the client resumes
//! from its last resourceVersion (or relists once that is gone).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::mpsc;

/// How far a watcher may fall behind.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Events queued (at least 1).
    pub events: usize,
    /// Bytes of their watch frames; one event larger than this still goes to an idle watcher.
    pub bytes: usize,
}

/// A backlog for `limits`: the store's end and the connection's.
pub fn channel<T>(limits: Limits) -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = mpsc::channel(limits.events.max(1));
    let shared = Arc::new(Shared::default());
    let sender = Sender {
        tx,
        shared: shared.clone(),
        cap: limits.bytes,
    };
    (sender, Receiver { rx, shared })
}

/// What both ends see.
#[derive(Default)]
struct Shared {
    /// Bytes of the queued events' frames.
    pending: AtomicUsize,
    /// The watcher fell behind: what is still queued is dropped, as upstream drops a closed
    /// watcher's buffer, and the stream ends.
    behind: AtomicBool,
}

/// The store's end; each item goes with its size in bytes.
pub struct Sender<T> {
    tx: mpsc::Sender<(T, usize)>,
    shared: Arc<Shared>,
    cap: usize,
}

impl<T> Sender<T> {
    /// Queues `item` of `size` bytes; `false` when the watcher has fallen behind (and is to be
    /// closed) or is gone.
    pub fn offer(&self, id: u64, item: T, size: usize) -> bool {
        let before = self.shared.pending.fetch_add(size, Ordering::SeqCst);
        let full = match before > 0 && before + size > self.cap {
            true => true,
            false => match self.tx.try_send((item, size)) {
                Ok(()) => return true,
                Err(mpsc::error::TrySendError::Full(_)) => true,
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            },
        };
        self.shared.pending.fetch_sub(size, Ordering::SeqCst);
        if full {
            tracing::warn!(watch = id, "closing watch: client too slow, buffer full");
            self.shared.behind.store(true, Ordering::SeqCst);
        }
        false
    }

    /// Whether the connection is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// The connection's end.
pub struct Receiver<T> {
    rx: mpsc::Receiver<(T, usize)>,
    shared: Arc<Shared>,
}

impl<T> Receiver<T> {
    /// The next event; `None` once the store has closed the watch.
    pub async fn recv(&mut self) -> Option<T> {
        let item = self.rx.recv().await?;
        self.taken(item)
    }

    /// The next event if one is queued.
    pub fn try_recv(&mut self) -> Option<T> {
        let item = self.rx.try_recv().ok()?;
        self.taken(item)
    }

    fn taken(&mut self, (item, size): (T, usize)) -> Option<T> {
        self.shared.pending.fetch_sub(size, Ordering::SeqCst);
        if self.shared.behind.load(Ordering::SeqCst) {
            self.rx.close();
            while self.rx.try_recv().is_ok() {}
            return None;
        }
        Some(item)
    }
}
