//! client-go's `EventCorrelator` (tools/record/events_cache.go): aggregation of similar events,
//! de-duplication of identical ones into a count, and the per-object spam filter — decided here,
//! without I/O, against an injected clock so it is tested with tokio's paused time.
//!
//! Order, as upstream: aggregate → observe (count/patch) → spam filter. A filtered event has still
//! been counted in the observation cache (an upstream quirk we keep so counts match).

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use tokio::time::Instant;

use super::lru::Lru;

/// `maxLruCacheEntries`: bound of each correlator cache.
const CACHE_SIZE: usize = 4096;
/// `defaultAggregateMaxEvents`: distinct messages before similar events are combined.
const AGGREGATE_MAX_EVENTS: usize = 10;
/// `defaultAggregateIntervalInSeconds`: a quiet gap after which aggregation starts over.
const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// `defaultSpamBurst`.
const SPAM_BURST: f64 = 25.0;
/// `defaultSpamQPS`: one event per 5 minutes per source+object after the burst.
const SPAM_QPS: f64 = 1.0 / 300.0;
/// Prefix of an aggregated event's message (`EventAggregatorByReasonMessageFunc`).
pub(crate) const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// What to do with one recorded event.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Correlation {
    /// Dropped by the spam filter.
    Skip,
    /// A new event: POST it.
    Create(Event),
    /// A repeat of a cached event: PATCH `count`, `lastTimestamp` and `message`; if the event is gone
    /// (404), POST `event` instead.
    Patch {
        event: Event,
        patch: serde_json::Value,
    },
}

struct AggregateRecord {
    local_keys: HashSet<String>,
    last: Instant,
}

#[derive(Clone)]
struct EventLog {
    count: i32,
    first_timestamp: Option<Time>,
    name: Option<String>,
    resource_version: Option<String>,
}

/// client-go's `TokenBucketPassiveRateLimiter`: starts full, refills continuously.
struct TokenBucket {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    fn try_accept(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * SPAM_QPS).min(SPAM_BURST);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The three caches of one event broadcaster.
pub(crate) struct EventCorrelator {
    aggregates: Lru<String, AggregateRecord>,
    observations: Lru<String, EventLog>,
    spam: Lru<String, TokenBucket>,
}

impl Default for EventCorrelator {
    fn default() -> Self {
        Self {
            aggregates: Lru::new(CACHE_SIZE),
            observations: Lru::new(CACHE_SIZE),
            spam: Lru::new(CACHE_SIZE),
        }
    }
}

fn join(parts: &[&str]) -> String {
    parts.join("\u{1f}")
}

fn source_and_object(e: &Event) -> Vec<&str> {
    let source = e.source.as_ref();
    let o = &e.involved_object;
    vec![
        source.and_then(|s| s.component.as_deref()).unwrap_or(""),
        source.and_then(|s| s.host.as_deref()).unwrap_or(""),
        o.kind.as_deref().unwrap_or(""),
        o.namespace.as_deref().unwrap_or(""),
        o.name.as_deref().unwrap_or(""),
        o.uid.as_deref().unwrap_or(""),
        o.api_version.as_deref().unwrap_or(""),
    ]
}

/// `getSpamKey`: source + object.
fn spam_key(e: &Event) -> String {
    join(&source_and_object(e))
}

/// `EventAggregatorByReasonFunc` aggregate key: source + object + type + reason + reporter.
fn aggregate_key(e: &Event) -> String {
    let mut parts = source_and_object(e);
    parts.extend([
        e.type_.as_deref().unwrap_or(""),
        e.reason.as_deref().unwrap_or(""),
        e.reporting_component.as_deref().unwrap_or(""),
        e.reporting_instance.as_deref().unwrap_or(""),
    ]);
    join(&parts)
}

/// `getEventKey`: source + object + type + reason + message.
pub(crate) fn event_key(e: &Event) -> String {
    let mut parts = source_and_object(e);
    parts.extend([
        e.type_.as_deref().unwrap_or(""),
        e.reason.as_deref().unwrap_or(""),
        e.message.as_deref().unwrap_or(""),
    ]);
    join(&parts)
}

impl EventCorrelator {
    /// Decides how `event` reaches the API; `now` drives the aggregation window and spam buckets,
    /// `wall` stamps aggregated events.
    pub fn correlate(&mut self, event: Event, now: Instant, wall: Timestamp) -> Correlation {
        let (event, key) = self.aggregate(event, now, wall);
        let (event, patch) = self.observe(event, key);
        let bucket = self
            .spam
            .get_or_insert_with(&spam_key(&event), || TokenBucket {
                tokens: SPAM_BURST,
                last: now,
            });
        if !bucket.try_accept(now) {
            return Correlation::Skip;
        }
        match patch {
            Some(patch) => Correlation::Patch { event, patch },
            None => Correlation::Create(event),
        }
    }

    /// `EventAggregate`: after 10 distinct messages for one source/object/type/reason within the
    /// interval, returns a combined event keyed by the aggregate key instead.
    fn aggregate(&mut self, event: Event, now: Instant, wall: Timestamp) -> (Event, String) {
        let agg_key = aggregate_key(&event);
        let local_key = event.message.clone().unwrap_or_default();
        let record = self
            .aggregates
            .get_or_insert_with(&agg_key, || AggregateRecord {
                local_keys: HashSet::new(),
                last: now,
            });
        if now.saturating_duration_since(record.last) > AGGREGATE_INTERVAL {
            record.local_keys.clear();
        }
        record.local_keys.insert(local_key.clone());
        record.last = now;
        if record.local_keys.len() < AGGREGATE_MAX_EVENTS {
            let key = event_key(&event);
            return (event, key);
        }
        // Keep the set from growing past the maximum (upstream `PopAny`).
        let evict = record
            .local_keys
            .iter()
            .find(|k| **k != local_key)
            .cloned()
            .unwrap_or(local_key);
        record.local_keys.remove(&evict);

        let stamp = Time(wall);
        let object_name = event.involved_object.name.clone().unwrap_or_default();
        let combined = Event {
            metadata: ObjectMeta {
                name: Some(format!("{object_name}.{:x}", wall.as_nanosecond())),
                namespace: event.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            count: Some(event.count.unwrap_or(1)),
            first_timestamp: Some(stamp.clone()),
            last_timestamp: Some(stamp),
            message: Some(format!(
                "{COMBINED_PREFIX}{}",
                event.message.as_deref().unwrap_or("")
            )),
            ..event
        };
        (combined, agg_key)
    }

    /// `eventObserve`: a cached key turns the event into a patch of the earlier one, its count
    /// raised by the event's own (1, or the repeats the recorder folded into it).
    fn observe(&mut self, mut event: Event, key: String) -> (Event, Option<serde_json::Value>) {
        let mut patch = None;
        if let Some(last) = self.observations.get_mut(&key).filter(|l| l.count > 0) {
            event.metadata.name = last.name.clone();
            event.metadata.resource_version = last.resource_version.clone();
            event.first_timestamp = last.first_timestamp.clone();
            event.count = Some(last.count.saturating_add(event.count.unwrap_or(1)));
            patch = Some(json!({
                "count": event.count,
                "lastTimestamp": event.last_timestamp,
                "message": event.message,
            }));
        }
        self.observations.insert(
            key,
            EventLog {
                count: event.count.unwrap_or(1),
                first_timestamp: event.first_timestamp.clone(),
                name: event.metadata.name.clone(),
                resource_version: event.metadata.resource_version.clone(),
            },
        );
        (event, patch)
    }

    /// `UpdateState`: remembers the server's copy (name, resourceVersion, count) after a write.
    pub fn update_state(&mut self, written: &Event) {
        self.observations.insert(
            event_key(written),
            EventLog {
                count: written.count.unwrap_or(1),
                first_timestamp: written.first_timestamp.clone(),
                name: written.metadata.name.clone(),
                resource_version: written.metadata.resource_version.clone(),
            },
        );
    }
}

#[cfg(test)]
#[path = "correlator_tests.rs"]
mod tests;
