//! Kubernetes Events (core/v1) written the way client-go's `tools/record` recorder writes them, so
//! `kubectl describe` shows the same counts, aggregation and rate limits operators know.
//!
//! - `correlator`: aggregation, de-duplication and the spam filter, as pure logic on a clock.
//! - `recorder`: the non-blocking [`EventRecorder`] handle, its buffer (8 MiB of distinct events
//!   waiting at the API server's pace, where client-go drops past 1,000) and the background
//!   writer (create, or patch `count`/`lastTimestamp`/`message`; up to 12 attempts 10 s apart).
//! - `writer`: the two API calls behind a trait, so retries are tested without a server.
//!
//! Difference from upstream: client-go gives up on any API status error and retries only transport
//! errors; we also retry 429 and 5xx responses, which are transient.

mod correlator;
mod lru;
mod recorder;
mod writer;

pub use recorder::EventRecorder;
pub(crate) use recorder::{EventCounters, Unwritten};

/// The Event `type`; only these two are valid, as client-go enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something an operator should look at.
    Warning,
}

impl EventType {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}
