//! JSON patch (RFC 6902) through the `json-patch` crate kube itself uses, applied atomically;
//! failures are 422 (400 for a body that is not a patch) as kube-apiserver reports them, in the
//! words of the evanphx/json-patch library it uses.
//!
//! One kube-apiserver behaviour the crate does not have: evanphx/json-patch reads a missing path
//! as `null`, so a `test` of `null` on a path that does not exist passes (kube-runtime's finalizer
//! helper relies on it when it adds the first finalizer). Such an operation is checked here, and
//! the crate is not asked.
//!
//! As upstream, a patch has at most 10,000 operations (413) and its `copy` operations may add at
//! most 3 MiB in all (422, counted before each copy is made, so a chain of copies doubling the
//! object never allocates past the limit).

use json_patch::{PatchError, PatchErrorKind, PatchOperation};
use serde_json::Value;

use crate::api::limits::{JSON_PATCH_MAX_COPY_BYTES, MAX_JSON_PATCH_OPERATIONS, json_len};
use crate::api::status::ApiError;

fn unprocessable(message: String) -> ApiError {
    ApiError {
        code: 422,
        reason: "Invalid".into(),
        message,
        details: Some(serde_json::json!({})),
        retry_after: None,
    }
}

/// One operation as the crate reads it, after the checks kube-apiserver words its own way: a known
/// `op`, a `value` where one is needed, JSON pointers that start with `/`. A missing `from` is the
/// root, as evanphx/json-patch reads it.
fn operation(op: &Value) -> Result<PatchOperation, ApiError> {
    let kind = op.get("op").and_then(Value::as_str).unwrap_or("");
    let path = op.get("path").and_then(Value::as_str).unwrap_or("");
    if !["add", "remove", "replace", "move", "copy", "test"].contains(&kind) {
        return Err(ApiError::bad_request(format!("Unexpected kind: {kind}")));
    }
    if matches!(kind, "add" | "replace" | "test") && op.get("value").is_none() {
        return Err(unprocessable(format!(
            "missing value for {kind} operation on {path}"
        )));
    }
    let from = op.get("from").and_then(Value::as_str).unwrap_or("");
    for pointer in [path, from] {
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(unprocessable(format!("invalid JSON pointer: {pointer}")));
        }
    }
    let mut op = op.clone();
    if let Some(fields) = op.as_object_mut() {
        fields.insert("path".into(), path.into());
        if matches!(kind, "move" | "copy") {
            fields.insert("from".into(), from.into());
        }
    }
    serde_json::from_value(op)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// kube-apiserver's message for `op` failing with `err` on `doc`.
fn message(doc: &Value, op: &PatchOperation, err: &PatchError) -> String {
    let missing = |kind: &str, path: &str| {
        format!("{kind} operation does not apply: doc is missing path: \"{path}\": missing value")
    };
    match (op, &err.kind) {
        (PatchOperation::Test(t), _) => {
            format!("testing value {} failed: test failed", t.path.as_str())
        }
        (PatchOperation::Add(a), _) => missing("add", a.path.as_str()),
        (PatchOperation::Remove(r), _) => missing("remove", r.path.as_str()),
        // evanphx/json-patch tells a missing parent from a missing key
        // (wh-mutating-bad-path.txt: a `replace` under a missing `/spec`).
        (PatchOperation::Replace(r), _) => {
            let path = r.path.as_str();
            let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
            let what = match doc.pointer(parent) {
                Some(Value::Object(_) | Value::Array(_)) => "key",
                _ => "path",
            };
            format!(
                "replace operation does not apply: doc is missing {what}: {path}: missing value"
            )
        }
        (PatchOperation::Move(m), PatchErrorKind::InvalidPointer) => {
            missing("add", m.path.as_str())
        }
        (PatchOperation::Move(m), _) => missing("remove", m.from.as_str()),
        (PatchOperation::Copy(c), PatchErrorKind::InvalidPointer) => {
            missing("add", c.path.as_str())
        }
        (PatchOperation::Copy(c), _) => format!(
            "copy operation does not apply: doc is missing from path: {}: missing value",
            c.from.as_str()
        ),
    }
}

/// Applies every operation or none.
pub fn apply(original: &Value, patch: &Value) -> Result<Value, ApiError> {
    let ops = patch.as_array().ok_or_else(|| {
        ApiError::bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    })?;
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::too_large(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            ops.len()
        )));
    }
    let ops = ops.iter().map(operation).collect::<Result<Vec<_>, _>>()?;
    let mut doc = original.clone();
    let mut copied = 0;
    for op in &ops {
        if let PatchOperation::Test(t) = op
            && t.value.is_null()
            && doc.pointer(t.path.as_str()).is_none()
        {
            continue;
        }
        if let PatchOperation::Copy(c) = op
            && let Some(from) = doc.pointer(c.from.as_str())
        {
            // Counted before the copy is made, so a patch never allocates past the limit.
            copied += json_len(from);
            if copied > JSON_PATCH_MAX_COPY_BYTES {
                return Err(unprocessable(format!(
                    "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {JSON_PATCH_MAX_COPY_BYTES}"
                )));
            }
        }
        json_patch::patch(&mut doc, std::slice::from_ref(op))
            .map_err(|e| unprocessable(message(&doc, op, &e)))?;
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn operations_and_atomic_failure() {
        let doc = json!({"a": {"b": [1, 2]}, "c": "x"});
        let out = apply(
            &doc,
            &json!([
                {"op": "add", "path": "/a/b/-", "value": 3},
                {"op": "replace", "path": "/c", "value": "y"},
                {"op": "copy", "from": "/c", "path": "/d"},
                {"op": "move", "from": "/d", "path": "/e~1f"},
                {"op": "remove", "path": "/a/b/0"},
                {"op": "test", "path": "/c", "value": "y"}
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": {"b": [2, 3]}, "c": "y", "e/f": "y"}));
        let err = apply(&doc, &json!([{"op": "test", "path": "/c", "value": "z"}])).unwrap_err();
        assert_eq!((err.code, err.reason.as_ref()), (422, "Invalid"));
        assert!(apply(&doc, &json!([{"op": "remove", "path": "/nope"}])).is_err());
    }

    /// kube-apiserver accepts a `test` of `null` on a missing path (kube-runtime's finalizer
    /// helper sends it before adding the first finalizer); on a present value it must match.
    #[test]
    fn testing_null_on_a_missing_path_passes() {
        let doc = json!({"metadata": {"name": "n"}});
        let out = apply(
            &doc,
            &json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}
            ]),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["f"]));
        let err = apply(
            &out,
            &json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]),
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "testing value /metadata/finalizers failed: test failed"
        );
    }

    #[test]
    fn errors_are_worded_as_kube_apiserver_words_them() {
        let doc = json!({"a": 1});
        let msg = |ops: Value| apply(&doc, &ops).unwrap_err();
        let e = msg(json!([{"op": "remove", "path": "/nope"}]));
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                422,
                "remove operation does not apply: doc is missing path: \"/nope\": missing value"
            )
        );
        let e = msg(json!([{"op": "replace", "path": "/nope", "value": 1}]));
        assert_eq!(
            e.message,
            "replace operation does not apply: doc is missing key: /nope: missing value"
        );
        let e = msg(json!([{"op": "copy", "from": "/x", "path": "/b"}]));
        assert_eq!(
            e.message,
            "copy operation does not apply: doc is missing from path: /x: missing value"
        );
        let e = msg(json!([{"op": "add", "path": "/x/y", "value": 1}]));
        assert_eq!(
            e.message,
            "add operation does not apply: doc is missing path: \"/x/y\": missing value"
        );
        let e = msg(json!([{"op": "add", "path": "x", "value": 1}]));
        assert_eq!(
            (e.code, e.message.as_str()),
            (422, "invalid JSON pointer: x")
        );
        let e = msg(json!([{"op": "add", "path": "/b"}]));
        assert_eq!(
            (e.code, e.message.as_str()),
            (422, "missing value for add operation on /b")
        );
        let e = msg(json!([{"op": "frob", "path": "/b"}]));
        assert_eq!((e.code, e.message.as_str()), (400, "Unexpected kind: frob"));
    }
}
