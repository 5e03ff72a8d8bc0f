//! Owns the informer's tasks: the task that turns one part's watch stream into store updates and
//! events, and the per-handler resync timers.
//!
//! The driver consumes any `Stream` of kube-runtime watcher events, so production uses
//! `kube_runtime::watcher` (LIST/WATCH, 410-Gone relists, default backoff) and tests feed
//! synthetic streams through exactly the same code.
//!
//! A relist (`Init`, `InitApply`…, `InitDone`) is buffered and applied at `InitDone` in one step:
//! readers keep seeing the previous complete state meanwhile, and handlers receive the diff,
//! including `Deleted` for objects that vanished while the watch was down.
//!
//! A list the API server refuses as malformed (400: a selector that does not parse, a field it
//! cannot select on) or in a form it does not serve (406) is never retried: the informer fails
//! with the server's message, which `wait_for_sync` reports.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube_runtime::watcher;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::key::ObjectKey;
use super::object::{Obj, stored};
use super::resource::CacheResource;

/// A function applied to every object before it is cached (e.g. dropping managedFields).
pub(crate) type Transform<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// What the driver writes into: the informer's store and its subscribers. Declared here and
/// implemented by the informer's shared state, so the dependency points one way (the state
/// starts the driver; the driver knows only this trait).
pub(crate) trait Cache: Send + Sync + 'static {
    /// The informer, for log lines.
    fn describe(&self) -> String;
    /// Caches one added or modified object and notifies the subscribers.
    fn upsert(&self, key: ObjectKey, obj: Obj);
    /// Forgets one deleted object and notifies the subscribers with its final state.
    fn delete(&self, key: &ObjectKey, last: Obj);
    /// Swaps in a complete list of one part and notifies the subscribers of the difference.
    fn replace(&self, part: usize, listed: Vec<(ObjectKey, Obj)>);
    /// Counts one failed list or watch and returns the count so far.
    fn watch_failed(&self) -> u64;
    /// Re-delivers the cache to one subscriber.
    fn resync(&self, id: u64);
    /// The informer can never list: record why and stop.
    fn fail(&self, why: String);
    /// The task ended: subscribers drain what is queued and stop.
    fn shut_down(&self);
}

/// Runs one informer until `stop` fires or the stream ends, then lets handlers drain.
pub(crate) async fn drive<K, S, C>(
    shared: Arc<C>,
    part: usize,
    stream: S,
    transform: Transform<K>,
    stop: CancellationToken,
) where
    K: CacheResource,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    C: Cache,
{
    let mut stream = std::pin::pin!(stream);
    let mut relist: Option<Vec<(ObjectKey, Obj)>> = None;
    let prepare = |mut obj: K| {
        transform(&mut obj);
        (ObjectKey::from_object(&obj), stored(obj))
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
                watcher::Event::InitDone => shared.replace(part, relist.take().unwrap_or_default()),
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
                if let Some(why) = refused(&error) {
                    shared.fail(why);
                    return;
                }
                let errors = shared.watch_failed();
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
pub(crate) async fn resync_loop<C>(
    shared: Weak<C>,
    id: u64,
    period: Duration,
    removed: CancellationToken,
    stop: CancellationToken,
) where
    C: Cache,
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

/// Why the API server will never serve this list: it refused it as malformed (400) or could not
/// answer in the form asked for (406). Other failures are retried with backoff.
fn refused(error: &watcher::Error) -> Option<String> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
            if status.code == 400 || status.code == 406 =>
        {
            Some(format!(
                "the API server refused its list ({} {}): {}",
                status.code, status.reason, status.message
            ))
        }
        _ => None,
    }
}
