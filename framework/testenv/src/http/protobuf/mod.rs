//! `application/vnd.kubernetes.protobuf`: the `k8s\0`
//! envelope (a `runtime.Unknown` naming the object's apiVersion and kind around its protobuf
//! bytes) for request bodies, responses and watch frames. The server keeps JSON: a protobuf body
//! is decoded into JSON once on arrival and a response is encoded once on the way out, through
//! k8s-pb's messages and their JSON names (`api::protobuf`), the message found by `kinds`.

mod kinds;

use bytes::{Bytes, BytesMut};
use k8s_pb::apimachinery::pkg::apis::meta::v1::WatchEvent;
use k8s_pb::apimachinery::pkg::runtime::{RawExtension, TypeMeta, Unknown};
use prost::Message;
use serde_json::Value;

use crate::api::status::ApiError;

/// The protobuf media type.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The protobuf watch media type.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
const MAGIC: &[u8] = b"k8s\0";

/// The format of a response body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `application/json`.
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

/// Whether a request body's `Content-Type` is protobuf.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type.split(';').next().map(str::trim) == Some(CONTENT_TYPE)
}

fn unrecognized(why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("the object provided is unrecognized: {why}"))
}

/// A protobuf request body as the JSON the handlers take, `apiVersion` and `kind` from the
/// envelope.
pub fn decode(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let unknown = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| unrecognized("the body has no k8s protobuf envelope"))
        .and_then(|b| Unknown::decode(b).map_err(unrecognized))?;
    let tm = unknown.type_meta.unwrap_or_default();
    let (api_version, kind) = (
        tm.api_version.unwrap_or_default(),
        tm.kind.unwrap_or_default(),
    );
    let raw = unknown.raw.unwrap_or_default();
    let mut obj = kinds::to_json(&api_version, &kind, &raw)
        .ok_or_else(|| unrecognized(format!("no protobuf form for {api_version}, Kind={kind}")))?
        .map_err(unrecognized)?;
    if let Value::Object(o) = &mut obj {
        o.insert("apiVersion".into(), Value::String(api_version));
        o.insert("kind".into(), Value::String(kind));
    }
    serde_json::to_vec(&obj).map_err(unrecognized)
}

/// A JSON response body in the envelope, `None` when its kind has no protobuf form, an error
/// naming the field when the JSON does not fit the kind's message.
pub fn encode(json: &Value) -> Option<Result<Vec<u8>, ApiError>> {
    let field = |k: &str| json.get(k).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    let raw = match kinds::from_json(api_version, kind, json)? {
        Ok(raw) => raw,
        Err(e) => {
            let why = format!("encoding {api_version}, Kind={kind} as protobuf: {e}");
            return Some(Err(ApiError::internal(&why)));
        }
    };
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.to_string()),
            kind: Some(kind.to_string()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    Some(Ok(out))
}

/// Turns the JSON lines of a watch stream into protobuf frames: each a 4-byte big-endian length,
/// then a `WatchEvent` whose object is an enveloped object. A partial line waits in `pending`.
pub fn watch_frames(pending: &mut BytesMut, chunk: &[u8]) -> Bytes {
    pending.extend_from_slice(chunk);
    let mut out = BytesMut::new();
    while let Some(end) = pending.iter().position(|b| *b == b'\n') {
        let line = pending.split_to(end + 1);
        let Ok(event) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let Some(Ok(object)) = event.get("object").and_then(encode) else {
            tracing::warn!(event = %String::from_utf8_lossy(&line), "watch event has no protobuf form");
            continue;
        };
        let frame = WatchEvent {
            r#type: event.get("type").and_then(Value::as_str).map(String::from),
            object: Some(RawExtension { raw: Some(object) }),
        }
        .encode_to_vec();
        out.extend_from_slice(&(frame.len() as u32).to_be_bytes());
        out.extend_from_slice(&frame);
    }
    out.freeze()
}
