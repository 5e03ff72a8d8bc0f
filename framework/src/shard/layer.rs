//! The shard gate as a tower layer: a key is reconciled only while this replica's ring admits it,
//! and the reconcile is dropped the moment the replica loses its membership.
//!
//! A key the ring does not admit is answered [`Action::Done`] without calling the service: the
//! member that owns it reconciles it, and [`super::requeue_gained`] puts it back on this
//! replica's queue if it ever becomes this replica's (ahead of mere re-verification when the
//! dropped hand-out carried an event: its owner may have been dead, see `missed.rs`). A key that
//! is this replica's but in flight in another lane of the same controller (the service
//! controller's node sync beside its Service sync) waits for that reconcile, so one key never
//! runs twice at once even within a replica.
//!
//! In label mode an admitted key absent from the replica's cache is reconciled only once the API
//! server confirms its object is gone (see `presence.rs`): absent here is not deleted.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use tower::{BoxError, Layer, Service};

use super::handover::Ring;
use super::presence::Verdict;
use crate::controller::{Action, Request};
use crate::informer::ObjectKey;
use crate::workqueue::AddReason;

/// How a queue key names the object it is about (what the ring hashes).
type KeyFn<K> = Arc<dyn Fn(&K) -> ObjectKey + Send + Sync>;

/// Gates every reconcile of the wrapped service through `ring` (see the module docs).
pub struct ShardLayer<K> {
    ring: Ring,
    key: KeyFn<K>,
}

impl<K> Clone for ShardLayer<K> {
    fn clone(&self) -> Self {
        Self {
            ring: self.ring.clone(),
            key: self.key.clone(),
        }
    }
}

impl<K> ShardLayer<K> {
    /// A gate whose queue keys map to objects through `key`.
    pub fn new(ring: Ring, key: impl Fn(&K) -> ObjectKey + Send + Sync + 'static) -> Self {
        Self {
            ring,
            key: Arc::new(key),
        }
    }
}

impl ShardLayer<String> {
    /// A gate for client-go style `namespace/name` (or `name`) string keys.
    pub fn for_string_keys(ring: Ring) -> Self {
        Self::new(ring, |key: &String| ObjectKey::parse(key))
    }
}

impl<K, S> Layer<S> for ShardLayer<K> {
    type Service = ShardService<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        ShardService {
            inner,
            ring: self.ring.clone(),
            key: self.key.clone(),
        }
    }
}

/// The service [`ShardLayer`] makes.
pub struct ShardService<S, K> {
    inner: S,
    ring: Ring,
    key: KeyFn<K>,
}

impl<S: Clone, K> Clone for ShardService<S, K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            ring: self.ring.clone(),
            key: self.key.clone(),
        }
    }
}

impl<S, K> Service<Request<K>> for ShardService<S, K>
where
    S: Service<Request<K>, Response = Action> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
    K: Send + 'static,
{
    type Response = Action;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Action, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<K>) -> Self::Future {
        // The ready clone goes into the future (tower's rule for a call made later); this one
        // takes its place for the next poll_ready.
        let fresh = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, fresh);
        let ring = self.ring.clone();
        let key = (self.key)(&request.key);
        // Only a re-verification when the low-priority add is all this hand-out absorbed.
        let fresh = !(request.cause.reason == AddReason::LowPriority && request.cause.adds <= 1);
        Box::pin(async move {
            let Some(admitted) = ring.admit_wait(&key, fresh).await else {
                tracing::trace!(ring = ring.name(), %key, "not this replica's key; dropped");
                return Ok(Action::Done);
            };
            if let Some(presence) = ring.presence() {
                match presence.verdict(&key).await {
                    Ok(Verdict::Reconcile) => {}
                    Ok(Verdict::NotHere) => {
                        tracing::trace!(ring = ring.name(), %key, "not labelled to this replica yet; dropped");
                        return Ok(Action::Done);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            tokio::select! {
                biased;
                () = admitted.lost().cancelled() => {
                    tracing::warn!(ring = ring.name(), %key, "shard membership lost; reconcile dropped");
                    Ok(Action::Done)
                }
                result = inner.call(request) => result.map_err(Into::into),
            }
        })
    }
}
