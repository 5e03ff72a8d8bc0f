//! The PATCH content types: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge
//! patch driven by the served type's list types (`Served::list_type`), and the body of a
//! server-side apply (whose merge and ownership live in `fields`).

pub mod json_patch;
mod merge;
mod strategic;
mod typed;

use serde_json::Value;

use crate::api::json_depth::{self, JsonError};
use crate::api::status::ApiError;
use crate::api::types::Served;

/// A PATCH body's content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/json-patch+json`
    Json,
    /// `application/merge-patch+json`
    Merge,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply; see `handlers::apply`)
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
    // Upstream's patchers read the patch with Go's JSON decoder: its depth error as it is.
    let decode = |b: &[u8]| -> Result<Value, ApiError> {
        json_depth::parse(b).map_err(|e| match e {
            JsonError::TooDeep(_) => ApiError::bad_request(e.to_string()),
            JsonError::Syntax(e) => ApiError::bad_request(format!("error decoding patch: {e}")),
        })
    };
    match kind {
        PatchKind::Apply => Err(ApiError::internal(
            "apply patches are merged by field ownership",
        )),
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

/// The configuration of a server-side apply: YAML (JSON is YAML too), one object.
pub fn decode_apply(body: &[u8]) -> Result<Value, ApiError> {
    let v = crate::api::body::decode_yaml(body)?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: object to be applied must be a map",
        ));
    }
    Ok(v)
}

/// The checks upstream makes of an apply configuration before merging it: the type it names
/// and the name it carries must be the URL's.
pub fn check_apply_config(rt: &Served, config: &Value, name: &str) -> Result<(), ApiError> {
    let s = |p: &str| config.pointer(p).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (s("/apiVersion"), s("/kind"));
    if api_version.is_empty() || kind.is_empty() {
        return Err(ApiError::bad_request(format!(
            "invalid object type: {api_version}, Kind={kind}"
        )));
    }
    if api_version != rt.api_version() || kind != rt.kind() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            rt.api_version()
        )));
    }
    let given = s("/metadata/name");
    if !given.is_empty() && given != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({given}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}
