//! Protobuf on the wire: which format `Accept` asks for, a protobuf body decoded into JSON, and
//! a JSON response (or watch stream) re-encoded as protobuf.

use std::convert::Infallible;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;

use super::respond::{Body, error_response, full};
use super::route::Route;
use crate::api::status::ApiError;
use crate::http::accept::{self, Answer};
use crate::http::protobuf;

/// The answer `Accept` asks for: a resource's as [`accept::negotiate`] chooses it; a
/// non-resource path (discovery, OpenAPI, version) is always JSON.
pub(super) fn negotiate(route: &Route, accept: &str) -> Result<Answer, ApiError> {
    match route {
        Route::Resource { target, .. } => accept::negotiate(accept, target.rt.custom().is_none()),
        _ => Ok(Answer::JSON),
    }
}

/// A protobuf request body decoded into JSON, once, so everything after reads JSON; custom
/// resources have no protobuf form (415, as upstream).
pub(super) fn json_body(
    route: &Route,
    content_type: String,
    body: Bytes,
) -> Result<(String, Bytes), ApiError> {
    if !protobuf::is_protobuf(&content_type) {
        return Ok((content_type, body));
    }
    match route {
        Route::Resource { target, .. } if target.rt.custom().is_none() => {
            let json = protobuf::decode(&body)?;
            Ok(("application/json".to_string(), Bytes::from(json)))
        }
        _ => Err(ApiError::unsupported_media_type()),
    }
}

/// A JSON response re-encoded, once, as protobuf: a whole body, or a watch stream frame by
/// frame. A body of another type (text) or a kind without a protobuf form stays.
pub(super) async fn encode_response(response: Response<Body>, watch: bool) -> Response<Body> {
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/json");
    if !json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let body = if watch && parts.status == StatusCode::OK {
        let mut pending = bytes::BytesMut::new();
        let frames = body.into_data_stream().map(move |chunk| {
            let chunk = chunk.unwrap_or_default();
            Ok::<_, Infallible>(Frame::data(protobuf::watch_frames(&mut pending, &chunk)))
        });
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(protobuf::WATCH_CONTENT_TYPE),
        );
        StreamBody::new(frames).boxed_unsync()
    } else {
        let bytes = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        match serde_json::from_slice(&bytes)
            .ok()
            .as_ref()
            .and_then(protobuf::encode)
        {
            Some(Err(e)) => {
                tracing::error!(error = %e.message, "protobuf response");
                return error_response(&e, false);
            }
            Some(Ok(pb)) => {
                parts.headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(protobuf::CONTENT_TYPE),
                );
                parts.headers.remove(header::CONTENT_LENGTH);
                full(pb)
            }
            None => full(bytes),
        }
    };
    Response::from_parts(parts, body)
}
