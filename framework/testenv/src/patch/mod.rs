//! The PATCH content types: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic
//! merge patch driven by the served type's list types (`Served::list_type`). Server-side apply is refused with
//! 415, exactly as a server that does not implement a patch type refuses it.

mod json_patch;
mod merge;
mod strategic;

use serde_json::Value;

use crate::status::ApiError;
use crate::types::Served;

/// A PATCH body's content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/json-patch+json`
    Json,
    /// `application/merge-patch+json`
    Merge,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply; refused)
    Apply,
}

impl PatchKind {
    /// From the Content-Type header (parameters ignored).
    pub fn from_content_type(ct: &str) -> Option<PatchKind> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchKind::Apply)
            }
            _ => None,
        }
    }
}

/// Applies a patch to an object; the caller then runs update admission on the result.
pub fn apply(
    rt: &Served,
    kind: PatchKind,
    original: &Value,
    body: &[u8],
) -> Result<Value, ApiError> {
    let decode = |b: &[u8]| -> Result<Value, ApiError> {
        serde_json::from_slice(b)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
    };
    match kind {
        PatchKind::Apply => Err(ApiError::unsupported_media_type()),
        PatchKind::Merge => {
            let patch = decode(body)?;
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "json: cannot unmarshal non-object patch into Go value of type map[string]interface {}",
                ));
            }
            Ok(merge::merge_patch(original, &patch))
        }
        PatchKind::Json => {
            let patch = decode(body)?;
            json_patch::apply(original, &patch)
        }
        PatchKind::Strategic => {
            let patch = decode(body)?;
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "unable to find api field in struct for the patch",
                ));
            }
            strategic::apply(rt, original, &patch)
        }
    }
}
