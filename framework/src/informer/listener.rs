//! Owns per-handler delivery: each registered handler gets its own unbounded queue and its own
//! task (client-go's `processorListener`), so a slow or stuck handler delays only itself.
//!
//! Also owns [`HandlerRegistration`], the handle through which a controller learns that its
//! handler has seen the initial list and through which it unsubscribes.

use std::sync::Weak;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::Span;

use super::event::{Event, EventHandler};
use super::object::Object;
use super::source::EventSource;

/// One item in a handler's queue.
pub(crate) enum Notification {
    /// An event to hand to the handler, with the `watch event` span to run the handler in and
    /// where the event came from.
    Event(Event<dyn Object>, Span, EventSource),
    /// Every object of the initial list (or of the replay) precedes this marker.
    InitialListDelivered,
}

/// The informer's side of one subscription: where to push its notifications.
pub(crate) struct Listener {
    pub(crate) id: u64,
    pub(crate) tx: mpsc::UnboundedSender<Notification>,
}

impl Listener {
    /// Queues one notification; false if the handler's task is gone.
    pub(crate) fn send(&self, n: Notification) -> bool {
        self.tx.send(n).is_ok()
    }
}

/// Everything a handler's task needs, kept until the informer has a runtime to spawn it on.
pub(crate) struct ListenerTask {
    pub(crate) id: u64,
    pub(crate) rx: mpsc::UnboundedReceiver<Notification>,
    pub(crate) handler: Box<dyn EventHandler<dyn Object>>,
    pub(crate) removed: CancellationToken,
    pub(crate) synced: watch::Sender<bool>,
    pub(crate) resync: Option<Duration>,
}

impl ListenerTask {
    /// Delivers queued notifications in order until the handler is removed or the informer drops
    /// the queue (after shutdown, once the queue is drained).
    pub(crate) async fn run(self) {
        let ListenerTask {
            id,
            mut rx,
            mut handler,
            removed,
            synced,
            ..
        } = self;
        loop {
            let next = tokio::select! {
                biased;
                _ = removed.cancelled() => break,
                next = rx.recv() => next,
            };
            match next {
                None => break,
                Some(Notification::InitialListDelivered) => {
                    synced.send_replace(true);
                }
                Some(Notification::Event(event, span, source)) => {
                    // The handler runs inside the event's span, so the `enqueue` spans it opens
                    // (and its log lines) belong to the event's trace. `on_event` is synchronous,
                    // so the span is never held across an await.
                    span.in_scope(|| {
                        // One handler's bug must not silently end its subscription or take down
                        // the process (client-go would crash it): log, skip the event, go on.
                        let delivered =
                            crate::panic_guard::catch(|| handler.on_event_from(&event, source));
                        if delivered.is_err() {
                            tracing::error!(
                                handler = id,
                                "informer event handler panicked; event skipped"
                            );
                        }
                    });
                }
            }
        }
    }
}

/// Lets a registration remove its listener without knowing the object type.
pub(crate) trait RemoveListener: Send + Sync {
    fn remove_listener(&self, id: u64);
}

/// A live subscription to an informer; dropping it (or calling [`remove`](Self::remove))
/// unsubscribes, so a controller that stops also stops receiving events.
///
/// Use [`detach`](Self::detach) for a handler that should live as long as the informer.
#[must_use = "dropping a HandlerRegistration removes the handler; call detach() to keep it"]
pub struct HandlerRegistration {
    pub(crate) id: u64,
    pub(crate) synced: watch::Receiver<bool>,
    pub(crate) removed: CancellationToken,
    pub(crate) informer: Weak<dyn RemoveListener>,
    pub(crate) detached: bool,
}

impl std::fmt::Debug for HandlerRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerRegistration")
            .field("id", &self.id)
            .field("synced", &self.has_synced())
            .finish()
    }
}

impl HandlerRegistration {
    /// True once this handler has processed every object of the initial list (or of its replay);
    /// controllers gate their workers on it like client-go's `registration.HasSynced`.
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until [`has_synced`](Self::has_synced); false if the handler stopped first (removed,
    /// or the informer shut down before listing).
    pub async fn wait_for_sync(&self) -> bool {
        self.synced_flag().wait().await
    }

    /// A cheap, cloneable probe of [`has_synced`](Self::has_synced) for readiness checks that
    /// outlive the borrow of the registration.
    pub fn synced_flag(&self) -> HandlerSynced {
        HandlerSynced(self.synced.clone())
    }

    /// Unsubscribes now; events still queued for this handler are discarded, as in client-go's
    /// `RemoveEventHandler`.
    pub fn remove(mut self) {
        self.remove_now();
    }

    /// Keeps the handler subscribed for the informer's whole life without holding this handle.
    pub fn detach(mut self) {
        self.detached = true;
    }

    fn remove_now(&mut self) {
        if self.detached {
            return;
        }
        self.detached = true;
        self.removed.cancel();
        if let Some(informer) = self.informer.upgrade() {
            informer.remove_listener(self.id);
        }
    }
}

impl Drop for HandlerRegistration {
    fn drop(&mut self) {
        self.remove_now();
    }
}

/// Shared view of one handler's "initial list delivered" flag, for gating a controller's workers
/// on its own handler rather than on the whole informer.
#[derive(Clone, Debug)]
pub struct HandlerSynced(watch::Receiver<bool>);

impl HandlerSynced {
    /// True once the handler has processed its initial list.
    pub fn get(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until the handler has processed its initial list; false if it stopped first.
    pub async fn wait(&self) -> bool {
        let mut rx = self.0.clone();
        rx.wait_for(|synced| *synced).await.is_ok()
    }
}
