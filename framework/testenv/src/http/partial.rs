//! Metadata-only answers (`Accept: ...;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`, or
//! `as=PartialObjectMetadataList` for a list), as kube-apiserver's `asPartialObjectMetadata`
//! and `asPartialObjectMetadataList` give them: each object as `{kind: PartialObjectMetadata,
//! apiVersion: meta.k8s.io/<v>, metadata}`, a list as a `PartialObjectMetadataList` keeping the
//! list's resourceVersion, continue token and remaining item count. A Status is never
//! converted. Asking for one where the other fits is a 406 naming the object's Go type; in a
//! watch, where upstream cannot refuse any more, such an event goes out unconverted.

use serde_json::{Map, Value, json};

use crate::api::status::ApiError;
use crate::api::types::Served;

fn is_status(v: &Value) -> bool {
    v.get("kind").and_then(Value::as_str) == Some("Status")
}

fn is_list(v: &Value) -> bool {
    v.get("items").is_some_and(Value::is_array)
}

/// One object's metadata only.
pub fn object(obj: &Value, version: &str) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    json!({"kind": "PartialObjectMetadata", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": meta})
}

/// A list's items' metadata only, with the list's own metadata.
fn list(list: &Value, version: &str) -> Value {
    let items: Vec<Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| object(o, version))
        .collect();
    let mut meta = Map::new();
    if let Some(list_meta) = list.get("metadata").and_then(Value::as_object) {
        for key in ["resourceVersion", "continue", "remainingItemCount"] {
            if let Some(v) = list_meta.get(key) {
                meta.insert(key.to_string(), v.clone());
            }
        }
    }
    json!({"kind": "PartialObjectMetadataList", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": meta, "items": items})
}

/// The Go type kube-apiserver names in its 406: the internal type of a built-in kind, the
/// unstructured one of a custom resource.
fn go_type(rt: &Served, is_list: bool) -> String {
    let suffix = if is_list { "List" } else { "" };
    if rt.custom().is_some() {
        return format!("*unstructured.Unstructured{suffix}");
    }
    let group = rt.api_version();
    let package = match group.split_once('/') {
        Some((group, _)) => group.split('.').next().unwrap_or(group).to_string(),
        None => "core".to_string(),
    };
    format!("*{package}.{}{suffix}", rt.kind())
}

/// `body` (an object, a list or a Status answering a request for `rt`) as metadata only; a 406
/// when a list is asked for as one object or an object as a list.
pub fn convert(rt: &Served, body: Value, as_list: bool, version: &str) -> Result<Value, ApiError> {
    if is_status(&body) {
        return Ok(body);
    }
    match (is_list(&body), as_list) {
        (true, true) => Ok(list(&body, version)),
        (false, false) => Ok(object(&body, version)),
        (true, false) => Err(ApiError::not_acceptable_because(format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({})",
            go_type(rt, true)
        ))),
        (false, true) => Err(ApiError::not_acceptable_because(format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
            go_type(rt, false)
        ))),
    }
}

/// One watch event's object as metadata only; unconverted when the watch asked for a list.
pub fn event_object(obj: &Value, as_list: bool, version: &str) -> Option<Value> {
    (!as_list && !is_status(obj)).then(|| object(obj, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configmaps() -> Served {
        Served::Builtin(
            &crate::api::kinds::TABLE
                [crate::api::kinds::lookup("", "v1", "configmaps").expect("served")],
        )
    }

    #[test]
    fn a_list_keeps_its_resource_version_and_continue_and_each_item_its_metadata() {
        let cms = json!({"kind": "ConfigMapList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "9", "continue": "c", "remainingItemCount": 1},
            "items": [{"metadata": {"name": "a", "labels": {"x": "y"}}, "data": {"k": "v"}}]});
        let partial = convert(&configmaps(), cms, true, "v1").expect("a list");
        assert_eq!(partial["kind"], "PartialObjectMetadataList");
        assert_eq!(
            partial["metadata"],
            json!({"resourceVersion": "9", "continue": "c", "remainingItemCount": 1})
        );
        assert_eq!(
            partial["items"][0],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a", "labels": {"x": "y"}}})
        );
    }

    #[test]
    fn the_wrong_shape_is_a_406_naming_the_go_type_and_a_status_passes() {
        let cm = json!({"metadata": {"name": "a"}, "data": {}});
        let err = convert(&configmaps(), cm, true, "v1").expect_err("not a list");
        assert_eq!(err.code, 406);
        assert_eq!(
            err.message,
            "you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)"
        );
        let status = json!({"kind": "Status", "apiVersion": "v1", "code": 404});
        assert_eq!(
            convert(&configmaps(), status.clone(), false, "v1").expect("passes"),
            status
        );
        assert_eq!(event_object(&status, false, "v1"), None);
    }
}
