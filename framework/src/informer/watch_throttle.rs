//! Backs off re-watches that follow watches which ended almost at once, so an API server or
//! proxy that cuts every watch stream is not hammered with WATCH requests in a tight loop.
//!
//! kube-runtime's watcher backs off on errors only: a watch that ends cleanly is re-issued
//! immediately, and one that ends immediately again makes a hot loop (found by
//! `tests/reliability_watch_backoff.rs`). client-go's reflector treats such a "very short watch"
//! (under 1 s, no events) as an error and backs off 800 ms → 30 s. This layer sits between one
//! informer's watcher and the client and does the same for WATCH requests, by how long the
//! previous watch lived. It does not see events, so a watch that delivered events and still
//! closed within a second also delays the next one (by at most the current backoff); that is
//! the only difference from client-go, and harmless.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Request, Response};
use kube::client::Body;
use parking_lot::Mutex;
use tokio::time::Instant;

/// A watch that lived less than this is "very short" (client-go's threshold).
pub(crate) const MIN_WATCH_LIFETIME: Duration = Duration::from_secs(1);
/// First delay after a very short watch, doubled for each further one (client-go / kube-runtime).
pub(crate) const INITIAL_DELAY: Duration = Duration::from_millis(800);
/// Longest delay between re-watches.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(30);

#[derive(Default)]
struct State {
    /// When the previous WATCH request was sent (after any delay).
    last_sent: Option<Instant>,
    /// Very short watches in a row.
    short_in_a_row: u32,
}

impl State {
    /// The delay before sending a WATCH that arrives `now`.
    fn delay(&mut self, now: Instant) -> Duration {
        let short = self
            .last_sent
            .is_some_and(|sent| now.saturating_duration_since(sent) < MIN_WATCH_LIFETIME);
        if !short {
            self.short_in_a_row = 0;
            return Duration::ZERO;
        }
        self.short_in_a_row = self.short_in_a_row.saturating_add(1);
        let doublings = self.short_in_a_row.saturating_sub(1).min(16);
        INITIAL_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
    }
}

/// The client of one informer, with WATCH requests throttled as the module docs say.
#[derive(Clone)]
pub(crate) struct WatchThrottle {
    inner: kube::Client,
    state: Arc<Mutex<State>>,
}

impl WatchThrottle {
    /// A client for one informer that sends through `client`.
    pub(crate) fn client(client: &kube::Client) -> kube::Client {
        let svc = WatchThrottle {
            inner: client.clone(),
            state: Arc::default(),
        };
        kube::Client::new(svc, client.default_namespace().to_string())
    }
}

fn is_watch(req: &Request<Body>) -> bool {
    req.uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"))
}

impl tower::Service<Request<Body>> for WatchThrottle {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
        // The client queues internally; readiness is decided there.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let client = self.inner.clone();
        if !is_watch(&req) {
            return Box::pin(async move { client.send(req).await });
        }
        let state = self.state.clone();
        Box::pin(async move {
            let delay = state.lock().delay(Instant::now());
            if !delay.is_zero() {
                tracing::warn!(
                    ?delay,
                    "watch closed less than {MIN_WATCH_LIFETIME:?} after it opened; backing off before re-watching"
                );
                tokio::time::sleep(delay).await;
            }
            let previous = state.lock().last_sent.replace(Instant::now());
            let response = client.send(req).await;
            // A refused WATCH (a 422 to a streaming list on an older server) never lived, so it
            // does not make the next one, the fallback's, a "very short" re-watch.
            if !matches!(&response, Ok(r) if r.status().is_success()) {
                state.lock().last_sent = previous;
            }
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn short_watches_back_off_and_a_long_one_resets() {
        let mut s = State::default();
        assert_eq!(s.delay(Instant::now()), Duration::ZERO);
        s.last_sent = Some(Instant::now());
        let mut delays = Vec::new();
        for _ in 0..8 {
            let d = s.delay(Instant::now());
            delays.push(d.as_millis());
            tokio::time::sleep(d).await;
            s.last_sent = Some(Instant::now());
        }
        assert_eq!(delays, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
        tokio::time::sleep(MIN_WATCH_LIFETIME).await;
        assert_eq!(s.delay(Instant::now()), Duration::ZERO);
        assert_eq!(s.short_in_a_row, 0);
    }
}
