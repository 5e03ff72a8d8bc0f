//! Absent is not deleted: in label mode a key can be missing from a replica's cache only because
//! its object is not (yet) labelled to that replica. [`Presence`] tells the gate whether a key
//! absent from the cache is really gone from the API server before a reconcile may treat it as
//! deleted.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::informer::ObjectKey;

type Cached = Box<dyn Fn(&ObjectKey) -> bool + Send + Sync>;
type OnServer =
    Arc<dyn Fn(ObjectKey) -> BoxFuture<'static, Result<bool, kube::Error>> + Send + Sync>;

/// Whether an object is in this replica's cache, and (asked only when it is not) whether it still
/// exists on the API server.
pub(crate) struct Presence {
    cached: Cached,
    on_server: OnServer,
}

/// What the gate does with an admitted key.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Cached, or gone from the server: reconcile it (a gone one as deleted).
    Reconcile,
    /// Absent here but still on the server (another member's, or not yet labelled): drop it; it
    /// arrives by watch once it is labelled to this replica.
    NotHere,
}

impl Presence {
    pub(crate) fn new(
        cached: impl Fn(&ObjectKey) -> bool + Send + Sync + 'static,
        on_server: impl Fn(ObjectKey) -> BoxFuture<'static, Result<bool, kube::Error>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self {
            cached: Box::new(cached),
            on_server: Arc::new(on_server),
        }
    }

    /// The verdict on `key`: one request (a LIST by name) when it is not cached, none otherwise.
    pub(crate) async fn verdict(&self, key: &ObjectKey) -> Result<Verdict, kube::Error> {
        if (self.cached)(key) {
            return Ok(Verdict::Reconcile);
        }
        let on_server = (self.on_server)(key.clone()).await?;
        Ok(if on_server {
            Verdict::NotHere
        } else {
            Verdict::Reconcile
        })
    }
}
