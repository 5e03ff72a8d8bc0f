//! `/debug/pprof` on the admin port (`--profiling`, upstream's default on), behind the same
//! delegated authentication and authorization as `/metrics`:
//!
//! - `/debug/pprof/profile?seconds=N`: a CPU profile of N seconds (1 to 300, default 30), gzipped
//!   pprof protobuf as Go serves it, so `go tool pprof https://…/debug/pprof/profile` reads it;
//!   one at a time (409 while one runs); cut short, not lost, when the server shuts down.
//! - `/debug/pprof/heap`: a heap profile from the [`HeapProfiler`] the binary plugged in (the
//!   allocator is the binary's choice, never the library's); 501 when there is none.
//! - `/debug/pprof/`: an index of the two.
//!
//! Differences from Go's `net/http/pprof`: no `goroutine`, `allocs`, `block`, `mutex`, `cmdline`,
//! `symbol` or `trace` profiles (404 `Unknown profile`); a `seconds` out of range is a 400 where
//! Go falls back to 30; a second concurrent CPU profile is a 409 where Go answers 500.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use super::text::text;
use crate::profiling::{
    CpuProfileError, CpuProfiler, DEFAULT_PROFILE_SECONDS, HeapProfiler, MAX_PROFILE_SECONDS,
    Profiling,
};

#[derive(Clone)]
struct Profilers {
    cpu: CpuProfiler,
    heap: Option<Arc<dyn HeapProfiler>>,
    stop: CancellationToken,
}

/// The `/debug/pprof` routes; CPU profiles end early when `stop` fires.
pub(crate) fn routes(profiling: &Profiling, stop: CancellationToken) -> Router {
    let profilers = Profilers {
        cpu: CpuProfiler::default(),
        heap: profiling.heap.clone(),
        stop,
    };
    Router::new()
        .route("/debug/pprof/", get(index))
        .route("/debug/pprof/profile", get(cpu))
        .route("/debug/pprof/heap", get(heap))
        .route("/debug/pprof/{name}", get(unknown))
        .with_state(profilers)
}

/// Go's `serveError`: plain text, marked as a pprof answer.
fn error(status: StatusCode, message: &str) -> Response {
    let mut response = text(status, format!("{message}\n"));
    response
        .headers_mut()
        .insert("x-go-pprof", HeaderValue::from_static("1"));
    response
}

/// A profile as an attachment named `name`, as Go serves it.
fn attachment(name: &'static str, body: Vec<u8>) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static(match name {
            "heap" => "attachment; filename=\"heap\"",
            _ => "attachment; filename=\"profile\"",
        }),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// The value of `key` in `query`, if given.
fn query_value<'q>(query: Option<&'q str>, key: &str) -> Option<&'q str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// `?seconds=N` as a duration within bounds, or the message for a 400.
fn profile_seconds(query: Option<&str>) -> Result<Duration, String> {
    let Some(raw) = query_value(query, "seconds") else {
        return Ok(Duration::from_secs(DEFAULT_PROFILE_SECONDS));
    };
    match raw.parse::<u64>() {
        Ok(n) if (1..=MAX_PROFILE_SECONDS).contains(&n) => Ok(Duration::from_secs(n)),
        _ => Err(format!(
            "seconds must be a whole number from 1 to {MAX_PROFILE_SECONDS}, got {raw:?}"
        )),
    }
}

async fn cpu(State(profilers): State<Profilers>, RawQuery(query): RawQuery) -> Response {
    let duration = match profile_seconds(query.as_deref()) {
        Ok(d) => d,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    match profilers.cpu.profile(duration, &profilers.stop).await {
        Ok(body) => attachment("profile", body),
        Err(e @ CpuProfileError::Busy) => error(StatusCode::CONFLICT, &e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

async fn heap(State(profilers): State<Profilers>, RawQuery(query): RawQuery) -> Response {
    if query_value(query.as_deref(), "debug").is_some_and(|v| v != "0") {
        return error(
            StatusCode::BAD_REQUEST,
            "only debug=0 (pprof protobuf) is served; read it with go tool pprof",
        );
    }
    if query_value(query.as_deref(), "seconds").is_some() {
        return error(
            StatusCode::BAD_REQUEST,
            "delta heap profiles (?seconds) are not served; take two profiles and compare them with go tool pprof -diff_base",
        );
    }
    let Some(profiler) = profilers.heap else {
        return error(
            StatusCode::NOT_IMPLEMENTED,
            "no heap profiler: this binary's allocator has none plugged in (the stock binary uses jemalloc's; an embedder sets Profiling::heap)",
        );
    };
    match tokio::task::spawn_blocking(move || profiler.heap_profile()).await {
        Ok(Ok(body)) => attachment("heap", body),
        Ok(Err(message)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("could not take the heap profile: {message}"),
        ),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("could not take the heap profile: {e}"),
        ),
    }
}

async fn index(State(profilers): State<Profilers>) -> Response {
    let heap = match profilers.heap {
        Some(_) => "<a href=\"heap\">heap</a>: a sampling of live heap allocations.",
        None => "heap: not available, no heap profiler is plugged into this binary.",
    };
    let body = format!(
        "<html>\n<head><title>/debug/pprof/</title></head>\n<body>\n/debug/pprof/<br>\n<br>\n\
         <a href=\"profile?seconds={DEFAULT_PROFILE_SECONDS}\">profile</a>: CPU profile; \
         ?seconds=N (1 to {MAX_PROFILE_SECONDS}) sets its length.<br>\n{heap}<br>\n\
         <br>\nRead them with go tool pprof.\n</body>\n</html>\n"
    );
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

async fn unknown(Path(name): Path<String>) -> Response {
    tracing::debug!(%name, "unknown profile asked for");
    error(
        StatusCode::NOT_FOUND,
        "Unknown profile (this build serves profile and heap)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_default_to_thirty_and_are_bounded() {
        assert_eq!(profile_seconds(None), Ok(Duration::from_secs(30)));
        assert_eq!(profile_seconds(Some("gc=1")), Ok(Duration::from_secs(30)));
        assert_eq!(
            profile_seconds(Some("x=1&seconds=300")),
            Ok(Duration::from_secs(300))
        );
        for bad in [
            "seconds=0",
            "seconds=301",
            "seconds=-1",
            "seconds=1.5",
            "seconds",
        ] {
            let err = profile_seconds(Some(bad)).unwrap_err();
            assert!(
                err.starts_with("seconds must be a whole number from 1 to 300"),
                "{err}"
            );
        }
    }
}
