//! The `scale` subresource of a custom resource: an `autoscaling/v1` Scale read from, and written
//! to, the paths the CRD names (`specReplicasPath`, `statusReplicasPath`, `labelSelectorPath`).

use serde_json::{Map, Value, json};

use crate::api::status::{ApiError, Cause};
use crate::api::types::Served;
use crate::crd::columns::find;

fn segments(path: &str) -> Vec<&str> {
    path.trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .collect()
}

/// The Scale of a stored object.
pub fn of(rt: &Served, obj: &Value) -> Value {
    let Some(spec) = rt.scale() else {
        return Value::Null;
    };
    let int = |p: &str| find(obj, p).first().and_then(|v| v.as_i64()).unwrap_or(0);
    let mut meta = Map::new();
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj.get("metadata").and_then(|m| m.get(k)) {
            meta.insert(k.into(), v.clone());
        }
    }
    let replicas = int(&spec.spec_replicas);
    let mut status = json!({"replicas": int(&spec.status_replicas)});
    if let Some(sel) = &spec.label_selector
        && let Some(s) = find(obj, sel).first().and_then(|v| v.as_str())
    {
        status["selector"] = s.into();
    }
    let spec_json = if replicas == 0 {
        json!({})
    } else {
        json!({"replicas": replicas})
    };
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta, "spec": spec_json, "status": status})
}

/// The object with the Scale's `spec.replicas` written to `specReplicasPath`.
pub fn update(rt: &Served, old: &Value, scale: Value) -> Result<Value, ApiError> {
    let Some(spec) = rt.scale() else {
        return Err(ApiError::no_route());
    };
    let name = old
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let rv = scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !rv.is_empty()
        && Some(rv)
            != old
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
    {
        return Err(ApiError::stale(rt.group(), rt.plural(), name));
    }
    let replicas = match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_i64().ok_or_else(|| {
            ApiError::bad_request(format!(
                "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {} into Go struct field ScaleSpec.spec.replicas of type int32",
                crate::api::structural::json_type(v)
            ))
        })?,
    };
    if replicas < 0 {
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            name,
            vec![Cause::invalid(
                "spec.replicas",
                &replicas.to_string(),
                "must be greater than or equal to 0",
            )],
        ));
    }
    let mut new = old.clone();
    let segs = segments(&spec.spec_replicas);
    let mut cur = &mut new;
    for (i, seg) in segs.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        if i + 1 == segs.len() {
            cur[*seg] = replicas.into();
        } else {
            cur = &mut cur[*seg];
        }
    }
    Ok(new)
}
