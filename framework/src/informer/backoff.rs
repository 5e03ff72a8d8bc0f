//! Backoff between failed LIST/WATCH attempts of one informer that grows while nothing succeeds.
//!
//! kube-runtime's `default_backoff()` (`StreamBackoff`) resets on every `Ok` item, and the watcher
//! emits `Event::Init` *before* each (re)list — so a LIST that keeps failing was retried every
//! 0.8–1.6 s forever instead of backing off to 30 s (found by
//! `tests/reliability_watch_backoff.rs`). Here only real progress (the initial list completing,
//! a watch event) resets the backoff, as client-go's reflector does. The delays are
//! kube-runtime's `DefaultBackoff`: client-go's 800 ms doubling to 30 s, with jitter, reset after
//! 120 s without errors.

use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube_runtime::utils::Backoff;
use kube_runtime::watcher::{self, DefaultBackoff};

struct State<S> {
    inner: Pin<Box<S>>,
    backoff: DefaultBackoff,
    /// Delay owed before the next attempt, after an error was passed on.
    pending: Option<Duration>,
}

/// Wraps a watcher stream: after each error, waits the next backoff delay before polling on.
pub(crate) fn with_backoff<K, S>(
    stream: S,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send
where
    K: Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let state = State {
        inner: Box::pin(stream),
        backoff: DefaultBackoff::default(),
        pending: None,
    };
    futures::stream::unfold(state, |mut st| async move {
        if let Some(delay) = st.pending.take() {
            tokio::time::sleep(delay).await;
        }
        let item = st.inner.next().await?;
        match &item {
            Err(_) => st.pending = Some(st.backoff.next().unwrap_or(Duration::from_secs(30))),
            // A (re)list is starting: not progress yet.
            Ok(watcher::Event::Init) => {}
            Ok(_) => st.backoff.reset(),
        }
        Some((item, st))
    })
}
