//! Watch streams: a chunked HTTP body of newline-delimited `{"type","object"}` frames, started from
//! history (resume), from a snapshot (rv unset / "0") or as a streaming list
//! (`sendInitialEvents=true`, ended by the `k8s.io/initial-events-end` bookmark), with periodic
//! BOOKMARKs (`allowWatchBookmarks`), `timeoutSeconds`, and the ERROR 410 event for a
//! resourceVersion older than the retained history.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use tokio::sync::mpsc;

use crate::api::kinds::ResId;
use crate::api::status::ApiError;
use crate::api::types::Served;
use crate::http::accept::Conversion;
use crate::http::partial;
use crate::storage::selectors::Filter;
use crate::storage::store::{Event, Store, WatchStart, watch_line};

/// Parsed watch query parameters.
#[derive(Debug, Default, Clone)]
pub struct WatchParams {
    /// Selection.
    pub filter: Filter,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
    /// Send each object as a one-row Table (kubectl's `Accept: ...;as=Table`) or as its
    /// metadata only (`as=PartialObjectMetadata`).
    pub conversion: Conversion,
}

/// How often a bookmark-enabled watch gets a BOOKMARK.
#[derive(Debug, Clone, Copy)]
pub struct WatchConfig {
    /// Interval between bookmarks.
    pub bookmark_interval: Duration,
    /// Which streaming-list answers the server gives.
    pub list_support: crate::http::watch_list::WatchListSupport,
}

/// Opens the stream; errors before the stream are HTTP errors, an expired resourceVersion is an
/// ERROR event inside a 200 stream (as upstream). The streaming-list parameters arrive already
/// validated and read by [`crate::http::watch_list::check_watch`].
pub fn open(
    store: &Arc<Store>,
    res: ResId,
    rt: Served,
    p: WatchParams,
    cfg: WatchConfig,
) -> Result<mpsc::Receiver<Bytes>, ApiError> {
    let initial_events = p.send_initial_events == Some(true);
    // Upstream ends the initial events with the annotated bookmark only when bookmarks are on.
    let end_bookmark = initial_events && p.bookmarks;
    let requested = match p.resource_version.as_deref() {
        None | Some("") | Some("0") => None,
        Some(s) => Some(
            s.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))?,
        ),
    };
    let (out_tx, out_rx) = mpsc::channel::<Bytes>(2);
    let opened = store.with(|s| {
        if let Some(n) = requested
            && n > s.rv()
        {
            return Err(Err(ApiError::too_large_rv(n, s.rv())));
        }
        // `sendInitialEvents=false` without a resourceVersion starts at the most recent one.
        let start = match (initial_events, requested, p.send_initial_events) {
            (true, _, _) | (false, None, None) => WatchStart::Snapshot,
            (false, None, Some(_)) => WatchStart::From(s.rv()),
            (false, Some(n), _) => WatchStart::From(n),
        };
        s.subscribe(res, p.filter.clone(), start).map_err(Ok)
    });
    let sub = match opened {
        Ok(sub) => sub,
        Err(Err(e)) => return Err(e),
        Err(Ok(floor)) => {
            let err = ApiError::expired(requested.unwrap_or(0), floor + 1);
            let mut status = err.to_status();
            if let Some(m) = status.as_object_mut() {
                m.remove("details");
            }
            let _ = out_tx.try_send(watch_line("ERROR", &status));
            return Ok(out_rx);
        }
    };
    let (kind, api_version) = (rt.kind().to_string(), rt.api_version());
    let conversion = p.conversion;
    let metadata = move |obj: &serde_json::Value| match conversion {
        Conversion::Metadata { list, version } => partial::event_object(obj, list, version),
        Conversion::None | Conversion::Table => None,
    };
    let bookmark = move |rv: u64, end: bool| -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": kind, "apiVersion": api_version, "metadata": meta});
        watch_line("BOOKMARK", &metadata(&obj).unwrap_or(obj))
    };
    let line = move |e: &Event| -> Bytes {
        match shaped(&rt, conversion, &e.object) {
            Some(shaped) => watch_line(e.ty.as_str(), &shaped),
            None => e.line(),
        }
    };
    let store = store.clone();
    // Each frame goes out as the event's own shared bytes, never copied per watcher: a stalled
    // connection holds the events its bounded backlog and this short queue hold, nothing more.
    tokio::spawn(async move {
        let initial = sub.initial.iter().map(|e| line(e));
        let end = end_bookmark.then(|| bookmark(sub.rv, true));
        for frame in initial.chain(end) {
            if out_tx.send(frame).await.is_err() {
                return;
            }
        }
        let mut rx = sub.rx;
        // Without timeoutSeconds upstream ends a watch after a random 30-60 minutes
        // (--min-request-timeout 1800 s, scaled by a random factor in [1, 2)).
        let timeout = p.timeout.unwrap_or_else(|| {
            Duration::from_secs(rand::Rng::random_range(&mut rand::rng(), 1800..3600))
        });
        let deadline = tokio::time::Instant::now() + timeout; // capped by query::watch_timeout
        let mut ticker = tokio::time::interval_at(
            tokio::time::Instant::now() + cfg.bookmark_interval,
            cfg.bookmark_interval,
        );
        loop {
            let frames = tokio::select! {
                ev = rx.recv() => {
                    let Some(ev) = ev else { break };
                    vec![line(&ev)]
                }
                _ = ticker.tick(), if p.bookmarks => {
                    let rv = store.with(|s| s.rv());
                    let mut pending: Vec<Arc<Event>> = Vec::new();
                    while let Some(ev) = rx.try_recv() {
                        pending.push(ev);
                    }
                    let (before, after): (Vec<_>, Vec<_>) =
                        pending.into_iter().partition(|e| e.rv <= rv);
                    let mut frames: Vec<Bytes> = before.iter().map(|e| line(e)).collect();
                    frames.push(bookmark(rv, false));
                    frames.extend(after.iter().map(|e| line(e)));
                    frames
                }
                _ = tokio::time::sleep_until(deadline) => break,
                _ = out_tx.closed() => break,
            };
            for frame in frames {
                if out_tx.send(frame).await.is_err() {
                    return;
                }
            }
        }
    });
    Ok(out_rx)
}

/// An event's object as a watch asking for `conversion` sends it: a one-row Table, its metadata
/// only, or (`None`) whole.
pub fn shaped(
    rt: &Served,
    conversion: Conversion,
    obj: &serde_json::Value,
) -> Option<serde_json::Value> {
    match conversion {
        Conversion::Table => Some(crate::http::table::single(rt, obj)),
        Conversion::Metadata { list, version } => partial::event_object(obj, list, version),
        Conversion::None => None,
    }
}

/// Whether a query flag is set the way Go's `strconv.ParseBool` reads it.
pub fn flag(v: Option<&str>) -> bool {
    matches!(v, Some("1" | "t" | "T" | "true" | "TRUE" | "True"))
}
