//! Fault injection: the handle tests use to make the server misbehave the way real clusters do
//! (watches cut, history compacted, 5xx / 429 bursts, random failures, slow responses), so client
//! retry, re-watch and re-list paths can be exercised deterministically.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::Rng;

use crate::api::status::ApiError;
use crate::storage::store::Store;

#[derive(Debug, Default)]
struct Settings {
    next_count: usize,
    next_status: u16,
    next_retry_after: Option<Duration>,
    ratio: f64,
    ratio_status: u16,
    latency: Duration,
}

/// Handle to inject faults into a running [`crate::TestEnv`]; clones control the same server.
#[derive(Clone)]
pub struct Faults {
    settings: Arc<Mutex<Settings>>,
    store: Arc<Store>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("settings", &*self.settings.lock())
            .finish()
    }
}

impl Faults {
    pub(crate) fn new(store: Arc<Store>) -> Faults {
        Faults {
            settings: Arc::default(),
            store,
        }
    }

    /// Ends every open watch stream now; clients must re-watch (from their last resourceVersion).
    pub fn close_watches(&self) {
        self.store.with(|s| s.close_watches());
    }

    /// Forgets the event history, so the next watch from any older resourceVersion gets an
    /// ERROR event with 410 Expired and the client has to re-list.
    pub fn expire_history(&self) {
        self.store.with(|s| s.expire_history());
    }

    /// Fails the next `n` requests (watches included) with `status`; with `retry_after` the
    /// response carries `Retry-After` (as 429 responses from API priority and fairness do).
    pub fn fail_next(&self, n: usize, status: u16, retry_after: Option<Duration>) {
        let mut s = self.settings.lock();
        s.next_count = n;
        s.next_status = status;
        s.next_retry_after = retry_after;
    }

    /// Fails a random fraction of all requests from now on with `status` (0.0 turns it off).
    pub fn fail_ratio(&self, ratio: f64, status: u16) {
        let mut s = self.settings.lock();
        s.ratio = ratio.clamp(0.0, 1.0);
        s.ratio_status = status;
    }

    /// Delays every response by `d` (Duration::ZERO turns it off).
    pub fn set_latency(&self, d: Duration) {
        self.settings.lock().latency = d;
    }

    pub(crate) fn latency(&self) -> Duration {
        self.settings.lock().latency
    }

    /// The injected failure for the request being served, if any.
    pub(crate) fn take_failure(&self) -> Option<ApiError> {
        let mut s = self.settings.lock();
        if s.next_count > 0 {
            s.next_count -= 1;
            let secs = s.next_retry_after.map(|d| d.as_secs().max(1));
            return Some(ApiError::injected(s.next_status, secs));
        }
        if s.ratio > 0.0 && rand::rng().random_bool(s.ratio) {
            return Some(ApiError::injected(s.ratio_status, None));
        }
        None
    }
}
