//! Rendering a response: the body type, JSON (pretty for curl, as upstream) with upstream's
//! headers, `Status` errors, Tables and `Warning` headers.

use std::collections::HashMap;
use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use serde::Serialize;
use serde_json::Value;

use crate::api::status::ApiError;
use crate::http::watch;

/// Response body type of the server.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

pub(super) fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed_unsync()
}

pub(super) fn pretty(query: &HashMap<String, String>, ua: Option<&str>) -> bool {
    match query.get("pretty") {
        Some(v) => watch::flag(Some(v)),
        None => ua.is_some_and(|u| u.starts_with("curl/") || u.contains("Wget")),
    }
}

pub(super) fn json_response<T: Serialize>(code: u16, value: &T, pretty: bool) -> Response<Body> {
    let body = if pretty {
        serde_json::to_vec_pretty(value).map(|mut v| {
            v.push(b'\n');
            v
        })
    } else {
        serde_json::to_vec(value)
    };
    let (code, body) = match body {
        Ok(b) => (code, b),
        Err(e) => (
            500,
            serde_json::to_vec(&ApiError::internal(&e.to_string()).to_status()).unwrap_or_default(),
        ),
    };
    let mut resp = Response::new(full(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_headers(resp.headers_mut());
    resp
}

/// The headers of upstream's JSON answers, watches included.
pub(super) fn json_headers(headers: &mut http::HeaderMap) {
    let json = HeaderValue::from_static("application/json");
    headers.insert(header::CONTENT_TYPE, json);
    let no_cache = HeaderValue::from_static("no-cache, private");
    headers.insert(header::CACHE_CONTROL, no_cache);
}

pub(super) fn error_response(e: &ApiError, pretty: bool) -> Response<Body> {
    let mut resp = json_response(e.code, &e.to_status(), pretty);
    if let Some(secs) = e.retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// Adds one `Warning: 299 - "<text>"` header per warning, as upstream's warning recorder.
pub(super) fn with_warnings(mut resp: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {}", crate::api::status::go_quote(w)))
        {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

pub(super) fn table_response(v: &Value, pretty: bool) -> Response<Body> {
    let mut resp = json_response(200, v, pretty);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json;as=Table;v=v1;g=meta.k8s.io"),
    );
    resp
}
