//! Decoding a request body by its `Content-Type`: JSON (also with no type or `*/*`) or YAML;
//! any other type is a 415.

use serde_json::Value;

use crate::api::json_depth::{self, JsonError};
use crate::api::status::ApiError;

/// The JSON value of a review body.
pub fn decode(content_type: &str, body: &[u8]) -> Result<Value, ApiError> {
    decode_object("", content_type, body)
}

/// The JSON value of a create or update body of `kind`; JSON nested too deep is refused as
/// upstream's serializer refuses it, when it cannot even find the body's kind.
pub fn decode_object(kind: &str, content_type: &str, body: &[u8]) -> Result<Value, ApiError> {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    if ct == "application/yaml" {
        return decode_yaml(body);
    }
    if !(ct.is_empty() || ct == "application/json" || ct == "*/*") {
        return Err(ApiError::unsupported_media_type());
    }
    json_depth::parse(body).map_err(|e| match e {
        JsonError::TooDeep(_) => ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {e} ({})",
            summarize(body)
        )),
        JsonError::Syntax(e) => {
            ApiError::bad_request(format!("the object provided is unrecognized: {e}"))
        }
    })
}

/// A YAML body (`application/yaml` writes, apply configurations): JSON is YAML too.
pub fn decode_yaml(body: &[u8]) -> Result<Value, ApiError> {
    match json_depth::parse(body) {
        Ok(v) => Ok(v),
        Err(e @ JsonError::TooDeep(_)) => Err(ApiError::bad_request(e.to_string())),
        Err(JsonError::Syntax(_)) => serde_saphyr::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}"))),
    }
}

/// The first 30 bytes of a body for an error message, as upstream's `summarizeData`: as text
/// when it looks like a JSON object, else in hex.
pub fn summarize(body: &[u8]) -> String {
    match body.first() {
        None => "<empty>".into(),
        Some(b'{') if body.len() > 30 => format!("{} ...", String::from_utf8_lossy(&body[..30])),
        Some(b'{') => String::from_utf8_lossy(body).into_owned(),
        Some(_) => {
            let hex: String = body.iter().take(30).map(|b| format!("{b:02x}")).collect();
            if body.len() > 30 {
                format!("{hex} ...")
            } else {
                hex
            }
        }
    }
}
