//! Owns the informer's tasks: the one task that turns a watch stream into store updates and
//! events, and the per-handler resync timers.
//!
//! The driver consumes any `Stream` of kube-runtime watcher events, so production uses
//! `kube_runtime::watcher` (LIST/WATCH, 410-Gone relists, default backoff) and tests feed
//! synthetic streams through exactly the same code.
//!
//! A relist (`Init`, `InitApply`…, `InitDone`) is buffered and applied at `InitDone` in one step:
//! readers keep seeing the previous complete state meanwhile, and handlers receive the diff,
//! including `Deleted` for objects that vanished while the watch was down.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube_runtime::watcher;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::key::ObjectKey;
use super::shared::{Shared, Transform};

/// Runs one informer until `stop` fires or the stream ends, then lets handlers drain.
pub(crate) async fn drive<K, S>(
    shared: Arc<Shared<K>>,
    stream: S,
    transform: Transform<K>,
    stop: CancellationToken,
) where
    K: Resource + Send + Sync + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let mut stream = std::pin::pin!(stream);
    let mut relist: Option<Vec<(ObjectKey, Arc<K>)>> = None;
    let prepare = |mut obj: K| {
        transform(&mut obj);
        (ObjectKey::from_object(&obj), Arc::new(obj))
    };
    loop {
        let item = tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            item = stream.next() => item,
        };
        match item {
            None => break,
            Some(Ok(event)) => match event {
                watcher::Event::Init => relist = Some(Vec::new()),
                watcher::Event::InitApply(obj) => {
                    relist.get_or_insert_with(Vec::new).push(prepare(obj));
                }
                watcher::Event::InitDone => shared.replace(relist.take().unwrap_or_default()),
                watcher::Event::Apply(obj) => {
                    let (key, obj) = prepare(obj);
                    shared.upsert(key, obj);
                }
                watcher::Event::Delete(obj) => {
                    let (key, obj) = prepare(obj);
                    shared.delete(&key, obj);
                }
            },
            Some(Err(error)) => {
                let errors = shared
                    .watch_errors
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    + 1;
                tracing::warn!(
                    informer = %shared.describe(),
                    %error,
                    errors,
                    "list/watch failed; retrying with backoff"
                );
            }
        }
    }
    shared.shut_down();
}

/// Re-delivers the cache to one handler every `period` until the handler is removed or the
/// informer stops. Ticks that fall behind are delayed, not bunched (client-go resyncs on a timer
/// too, never in bursts).
pub(crate) async fn resync_loop<K>(
    shared: Weak<Shared<K>>,
    id: u64,
    period: Duration,
    removed: CancellationToken,
    stop: CancellationToken,
) where
    K: Resource + Send + Sync + 'static,
{
    let mut interval = tokio::time::interval_at(Instant::now() + period, period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = removed.cancelled() => return,
            _ = stop.cancelled() => return,
            _ = interval.tick() => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.resync(id);
    }
}
