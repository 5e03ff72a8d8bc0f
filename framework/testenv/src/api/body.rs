//! Decoding a request body by its `Content-Type`: JSON (also with no type or `*/*`) or YAML;
//! any other type is a 415.

use serde_json::Value;

use crate::api::status::ApiError;

/// The JSON value of a create, update or review body.
pub fn decode(content_type: &str, body: &[u8]) -> Result<Value, ApiError> {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    if ct == "application/yaml" {
        return decode_yaml(body);
    }
    if !(ct.is_empty() || ct == "application/json" || ct == "*/*") {
        return Err(ApiError::unsupported_media_type());
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the object provided is unrecognized: {e}")))
}

/// A YAML body (`application/yaml` writes, apply configurations): JSON is YAML too.
pub fn decode_yaml(body: &[u8]) -> Result<Value, ApiError> {
    match serde_json::from_slice(body) {
        Ok(v) => Ok(v),
        Err(_) => serde_saphyr::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}"))),
    }
}
