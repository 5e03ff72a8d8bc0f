//! What kube-apiserver refuses in the object a write would store, before storage: a patch's
//! result whose fields its Go types cannot hold (400, `decoding`), that carries another name
//! than the URL's (400, upstream's `checkName`) or another uid than the stored object's (409, the
//! storage's UID precondition, as for an update).

use serde_json::Value;

use crate::api::status::ApiError;
use crate::api::types::Served;

fn uid(v: &Value) -> &str {
    v.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// A write carrying a uid must carry the stored object's.
pub fn same_uid(rt: &Served, name: &str, old: &Value, new: &Value) -> Result<(), ApiError> {
    let (given, stored) = (uid(new), uid(old));
    if given.is_empty() || given == stored {
        return Ok(());
    }
    let why =
        format!("Precondition failed: UID in precondition: {given}, UID in object meta: {stored}");
    Err(ApiError::conflict(rt.group(), rt.plural(), name, &why))
}

/// The checks of a patch's result (`name` is the URL's).
pub fn patched(rt: &Served, name: &str, old: &Value, patched: &Value) -> Result<(), ApiError> {
    if let Some(e) = crate::api::decoding::type_error(rt, patched) {
        return Err(ApiError::bad_request(e));
    }
    let given = patched
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if given != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({given}) does not match the name on the URL ({name})"
        )));
    }
    same_uid(rt, name, old, patched)
}
