//! Streaming lists (KEP-3157; client-go's `WatchListClient`): an informer's initial list, and
//! every relist after a 410 Gone, come from one watch with `sendInitialEvents=true` instead of a
//! LIST, and that watch then carries on as the informer's watch. A server that refuses or
//! ignores the request gets LIST + WATCH (kube-runtime's watcher) from then on.
//!
//! The request is client-go's: `watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan
//! &allowWatchBookmarks=true&resourceVersion=` (empty: a consistent snapshot). The objects arrive
//! as ADDED and become [`watcher::Event::InitApply`]; the BOOKMARK annotated
//! `k8s.io/initial-events-end: "true"` is [`watcher::Event::InitDone`], where the driver swaps
//! them in as one new snapshot and the informer counts as synced. A stream cut before that
//! bookmark starts over with a fresh `Init`, so a partial snapshot is never applied.
//!
//! When the server does not serve them:
//! - a 400 or 422 answer that names one of those parameters (v1.23 refuses
//!   `resourceVersionMatch` on a watch; 1.27–1.33 with the `WatchList` gate off refuse
//!   `sendInitialEvents`) falls back; client-go falls back on such an error too, but asks again
//!   at every relist, where this remembers. A 400 or 422 about anything else (a selector) fails
//!   the informer as a refused LIST would;
//! - so does a server that ignores both parameters and serves a plain watch: anything but ADDED
//!   before the end bookmark (a MODIFIED, DELETED or plain BOOKMARK, which a server serving
//!   streaming lists never sends first) proves it. client-go would wait for the bookmark
//!   forever; this cannot tell such a server from a slow one until one of those arrives.
//!
//! Other failures (403, 5xx, a cut stream) are counted and retried as a streaming list with the
//! informer's backoff, as kube-runtime's watcher retries them.

use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::api::{Api, WatchEvent, WatchParams};
use kube::core::Status;
use kube_runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

/// The annotation on the BOOKMARK that ends the initial events.
pub(crate) const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Server-side watch timeout assumed when none is set (kube-runtime's), plus the margin after
/// which a silent watch counts as dead.
const DEFAULT_WATCH_TIMEOUT: u32 = 290;
const IDLE_MARGIN: Duration = Duration::from_secs(5);

type Watch<K> = BoxStream<'static, kube::Result<WatchEvent<K>>>;
type Events<K> = BoxStream<'static, Result<Event<K>, watcher::Error>>;

enum Phase<K> {
    /// Open a streaming list: the first sync, or a relist after 410 Gone.
    List,
    /// Receiving the initial events, up to the end bookmark.
    Initial(Watch<K>),
    /// Synced; live events after `rv`.
    Watching { rv: String, stream: Watch<K> },
    /// The watch ended cleanly; resume after `rv`.
    Resume(String),
    /// The server does not serve streaming lists: LIST + WATCH from now on.
    Fallback(Events<K>),
}

struct State<K, F> {
    api: Api<K>,
    config: watcher::Config,
    informer: String,
    phase: Phase<K>,
    /// Builds the LIST + WATCH stream (once, on fallback).
    fallback: Option<F>,
}

/// The informer's event stream over streaming lists, falling back to `fallback()` for good when
/// the server refuses or ignores them. `config` gives the selectors and the watch timeout.
pub(crate) fn stream<K, F>(
    api: Api<K>,
    config: watcher::Config,
    informer: String,
    fallback: F,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    F: FnOnce() -> Events<K> + Send + 'static,
{
    let state = State {
        api,
        config,
        informer,
        phase: Phase::List,
        fallback: Some(fallback),
    };
    futures::stream::unfold(state, |mut st| async move {
        let item = st.step().await?;
        Some((item, st))
    })
}

fn params(config: &watcher::Config, initial_events: bool) -> WatchParams {
    WatchParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        timeout: config.timeout,
        bookmarks: true,
        send_initial_events: initial_events,
    }
}

/// The request parameters only a server serving streaming lists takes on a watch; its refusal
/// names the one it does not take (`sendInitialEvents is forbidden for watch unless the WatchList
/// feature gate is enabled`, `resourceVersionMatch is forbidden for watch`).
const STREAMING_PARAMETERS: [&str; 2] = ["sendInitialEvents", "resourceVersionMatch"];

/// Whether a refused request says the server does not take the streaming-list parameters. A
/// refusal of anything else in it (a selector that does not parse, a field the kind cannot be
/// selected on) is not: a LIST would be refused the same.
fn refuses_parameters(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s)
        if (s.code == 400 || s.code == 422)
            && STREAMING_PARAMETERS.iter().any(|p| s.message.contains(p)))
}

fn is_gone(status: &Status) -> bool {
    status.code == 410
}

impl<K, F> State<K, F>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    F: FnOnce() -> Events<K> + Send + 'static,
{
    /// The next event; `None` only when the fallback stream ends.
    async fn step(&mut self) -> Option<Result<Event<K>, watcher::Error>> {
        loop {
            match std::mem::replace(&mut self.phase, Phase::List) {
                Phase::List => match self.api.watch(&params(&self.config, true), "").await {
                    Ok(stream) => {
                        self.phase = Phase::Initial(stream.boxed());
                        return Some(Ok(Event::Init));
                    }
                    Err(e) if refuses_parameters(&e) => {
                        self.fall_back(&format!("the server refused it: {e}"));
                    }
                    // The streaming list is this informer's list: a 403 or 5xx is retried as
                    // one; a 406 (no such representation) or a refused selector fails it for
                    // good.
                    Err(e) => return Some(Err(watcher::Error::InitialListFailed(e))),
                },
                Phase::Initial(mut stream) => match next(&mut stream, self.config.timeout).await {
                    Some(Ok(WatchEvent::Added(obj))) => {
                        self.phase = Phase::Initial(stream);
                        return Some(Ok(Event::InitApply(obj)));
                    }
                    Some(Ok(WatchEvent::Bookmark(b)))
                        if b.metadata
                            .annotations
                            .get(INITIAL_EVENTS_END)
                            .map(String::as_str)
                            == Some("true") =>
                    {
                        self.phase = Phase::Watching {
                            rv: b.metadata.resource_version,
                            stream,
                        };
                        return Some(Ok(Event::InitDone));
                    }
                    Some(Ok(WatchEvent::Error(status))) => {
                        return Some(Err(watcher::Error::WatchError(status)));
                    }
                    Some(Ok(other)) => {
                        let kind = match other {
                            WatchEvent::Modified(_) => "MODIFIED",
                            WatchEvent::Deleted(_) => "DELETED",
                            _ => "BOOKMARK",
                        };
                        self.fall_back(&format!(
                            "the server ignored it (a {kind} event before the initial-events-end bookmark)"
                        ));
                    }
                    Some(Err(e)) => return Some(Err(watcher::Error::WatchFailed(e))),
                    // Cut before the end bookmark: list again; the next `Init` drops what came.
                    None => {}
                },
                Phase::Watching { mut rv, mut stream } => {
                    let event = next(&mut stream, self.config.timeout).await;
                    let out = match event {
                        Some(Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj))) => {
                            advance(&mut rv, &obj);
                            Some(Ok(Event::Apply(obj)))
                        }
                        Some(Ok(WatchEvent::Deleted(obj))) => {
                            advance(&mut rv, &obj);
                            Some(Ok(Event::Delete(obj)))
                        }
                        Some(Ok(WatchEvent::Bookmark(b))) => {
                            rv = b.metadata.resource_version;
                            None
                        }
                        Some(Ok(WatchEvent::Error(status))) => {
                            let gone = is_gone(&status);
                            let error = Some(Err(watcher::Error::WatchError(status)));
                            if gone {
                                // Phase is `List`: relist through the same streaming path.
                                return error;
                            }
                            error
                        }
                        Some(Err(e)) => Some(Err(watcher::Error::WatchFailed(e))),
                        None => {
                            self.phase = Phase::Resume(rv);
                            continue;
                        }
                    };
                    self.phase = Phase::Watching { rv, stream };
                    if out.is_some() {
                        return out;
                    }
                }
                Phase::Resume(rv) => {
                    match self.api.watch(&params(&self.config, false), &rv).await {
                        Ok(stream) => {
                            self.phase = Phase::Watching {
                                rv,
                                stream: stream.boxed(),
                            };
                        }
                        Err(kube::Error::Api(status)) if is_gone(&status) => {
                            return Some(Err(watcher::Error::WatchError(status)));
                        }
                        Err(e) => {
                            self.phase = Phase::Resume(rv);
                            return Some(Err(watcher::Error::WatchStartFailed(e)));
                        }
                    }
                }
                Phase::Fallback(mut events) => {
                    let item = events.next().await;
                    self.phase = Phase::Fallback(events);
                    return item;
                }
            }
        }
    }

    /// Switches to LIST + WATCH for the rest of this informer's life.
    fn fall_back(&mut self, why: &str) {
        tracing::info!(
            informer = %self.informer,
            "streaming list not served ({why}); using LIST + WATCH from now on"
        );
        self.phase = match self.fallback.take() {
            Some(make) => Phase::Fallback(make()),
            None => Phase::List,
        };
    }
}

/// The next watch event, or `None` when the stream ends or stays silent past the watch's
/// `timeout` (the server's, plus a margin: the connection is then taken as dead).
async fn next<K>(
    stream: &mut Watch<K>,
    timeout: Option<u32>,
) -> Option<kube::Result<WatchEvent<K>>> {
    let timeout = timeout.unwrap_or(DEFAULT_WATCH_TIMEOUT);
    if timeout == 0 {
        return stream.next().await;
    }
    let idle = Duration::from_secs(u64::from(timeout)) + IDLE_MARGIN;
    tokio::time::timeout(idle, stream.next())
        .await
        .ok()
        .flatten()
}

/// Moves the watch position to `obj`'s resourceVersion (kept when the object carries none).
fn advance<K: kube::Resource>(rv: &mut String, obj: &K) {
    if let Some(v) = obj
        .meta()
        .resource_version
        .as_ref()
        .filter(|v| !v.is_empty())
    {
        rv.clone_from(v);
    }
}
