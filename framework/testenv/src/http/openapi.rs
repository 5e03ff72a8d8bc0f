//! The OpenAPI documents: the v3 index (`/openapi/v3`), one v3 document per served
//! group-version with every served kind's schema (built-in kinds from `builtin`, custom
//! resources from their CRD) and one PATCH operation per resource tagged with its
//! group-version-kind and the `fieldValidation` query parameter (what kubectl reads to leave
//! field validation to the server), and an empty `/openapi/v2` (kubectl's client-side
//! validation, needed for `kubectl create -f` of a `v1 List`, fetches it as protobuf).

use serde_json::{Map, Value, json};

use crate::api::openapi as builtin;
use crate::api::types::{Registry, Served};

const V3_REF_PREFIX: &str = "#/components/schemas/";

/// The media types of gnostic's protobuf `openapi_v2.Document`: the one kube-openapi answers
/// with, and the deprecated one client-go asks for (both accepted, as upstream).
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
const V2_PROTOBUF_DEPRECATED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// Whether an `Accept` header asks `/openapi/v2` for protobuf.
pub fn wants_v2_protobuf(accept: &str) -> bool {
    accept.contains(V2_PROTOBUF) || accept.contains(V2_PROTOBUF_DEPRECATED)
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`.
pub fn root(types: &Registry) -> Value {
    let mut paths = Map::new();
    for (_, r) in types.all() {
        let p = gv_path(r.group(), r.version());
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=testenv")}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/G/V`, if served.
pub fn group_version(types: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for (_, r) in types
        .all()
        .into_iter()
        .filter(|(_, r)| r.group() == group && r.version() == version)
    {
        let ns = if r.namespaced() {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        let path = format!(
            "/{}{ns}/{}/{{name}}",
            gv_path(r.group(), r.version()),
            r.plural()
        );
        if let Some(schema) = r.custom().and_then(|c| c.openapi.clone()) {
            let schema = with_gvk(with_type_meta(schema, &mut schemas), &r);
            schemas.insert(schema_name(&r), schema);
        }
        paths.insert(path, json!({
            "patch": {
                "operationId": format!("patch{}", r.kind()),
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": r.group(), "version": r.version(), "kind": r.kind()},
                "parameters": [
                    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}}
                ],
                "responses": {"200": {"description": "OK"}}
            }
        }));
    }
    if paths.is_empty() {
        return None;
    }
    for kind in builtin::kinds_of(group, version) {
        let Some(s) = builtin::schema(group, version, kind) else {
            continue;
        };
        for (name, def) in &s.defs {
            if !schemas.contains_key(name) {
                schemas.insert(name.clone(), to_v3(def));
            }
        }
        if let Some(Value::Object(root)) = schemas.get_mut(&s.root) {
            root.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "kind": kind, "version": version}]),
            );
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0-testenv"},
        "paths": paths,
        "components": {"schemas": schemas}
    }))
}

/// A generated definition in upstream's v3 shape: `$ref`s into `#/components/schemas/`, and a
/// `$ref` with siblings (a field's description) wrapped as `allOf: [{$ref}]`, since OpenAPI 3.0
/// ignores a `$ref`'s siblings.
fn to_v3(schema: &Value) -> Value {
    match schema {
        Value::Object(m) => {
            let mut out: Map<String, Value> = m
                .iter()
                .filter(|(k, _)| *k != "$ref")
                .map(|(k, v)| (k.clone(), to_v3(v)))
                .collect();
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                let r = match r.strip_prefix(builtin::REF_PREFIX) {
                    Some(name) => format!("{V3_REF_PREFIX}{name}"),
                    None => r.to_string(),
                };
                if out.is_empty() {
                    out.insert("$ref".into(), Value::String(r));
                } else {
                    out.insert("allOf".into(), json!([{"$ref": r}]));
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(to_v3).collect()),
        v => v.clone(),
    }
}

/// `/openapi/v2` as JSON: a valid Swagger 2.0 document without definitions.
pub fn v2_json() -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0-testenv"},
        "paths": {},
        "definitions": {}
    })
}

/// `/openapi/v2` as gnostic's protobuf `Document`: `swagger` (field 1) and `info` (field 2:
/// `title` 1, `version` 2), nothing else.
pub fn v2_protobuf() -> Vec<u8> {
    fn field(out: &mut Vec<u8>, number: u8, bytes: &[u8]) {
        // Length-delimited (wire type 2); every length here is below 128, one varint byte.
        out.push((number << 3) | 2);
        out.push(bytes.len() as u8);
        out.extend_from_slice(bytes);
    }
    let mut info = Vec::new();
    field(&mut info, 1, b"Kubernetes");
    field(&mut info, 2, b"v1.33.0-testenv");
    let mut doc = Vec::new();
    field(&mut doc, 1, b"2.0");
    field(&mut doc, 2, &info);
    doc
}

/// Upstream's name for a custom resource's schema: the reversed group, version and kind
/// (`com.example.stable.v1.Widget`).
fn schema_name(r: &Served) -> String {
    let mut group: Vec<&str> = r.group().split('.').collect();
    group.reverse();
    format!("{}.{}.{}", group.join("."), r.version(), r.kind())
}

/// A custom resource's schema with `apiVersion`, `kind` and `metadata` (an ObjectMeta reference)
/// as built-in kinds have them, as apiextensions-apiserver publishes it; the definitions
/// `metadata` reaches go into `schemas`.
fn with_type_meta(mut schema: Value, schemas: &mut Map<String, Value>) -> Value {
    let Some(cm) = builtin::schema("", "v1", "ConfigMap") else {
        return schema;
    };
    let (Some(root), Some(props)) = (
        cm.root_schema().and_then(|r| r.get("properties")),
        schema.as_object_mut(),
    ) else {
        return schema;
    };
    let props = props.entry("properties").or_insert_with(|| json!({}));
    if let Some(props) = props.as_object_mut() {
        for k in ["apiVersion", "kind", "metadata"] {
            if let Some(p) = root.get(k) {
                props.insert(k.into(), to_v3(p));
            }
        }
    }
    let mut pending = vec![OBJECT_META.to_string()];
    while let Some(name) = pending.pop() {
        if schemas.contains_key(&name) {
            continue;
        }
        let Some(def) = cm.defs.get(&name) else {
            continue;
        };
        refs(def, &mut pending);
        schemas.insert(name, to_v3(def));
    }
    schema
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The definition names a generated schema refers to.
fn refs(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(m) => {
            if let Some(name) = m
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(builtin::REF_PREFIX))
            {
                out.push(name.to_string());
            }
            m.values().for_each(|v| refs(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

fn with_gvk(mut schema: Value, r: &Served) -> Value {
    if let Some(m) = schema.as_object_mut() {
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": r.group(), "kind": r.kind(), "version": r.version()}]),
        );
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_with_siblings_become_all_of() {
        let v = to_v3(&json!({"properties": {
            "spec": {"$ref": "#/definitions/io.k8s.api.core.v1.NodeSpec", "description": "d"},
            "meta": {"$ref": "#/definitions/io.k8s.X"}
        }}));
        assert_eq!(
            v["properties"]["spec"],
            json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.NodeSpec"}], "description": "d"})
        );
        assert_eq!(
            v["properties"]["meta"],
            json!({"$ref": "#/components/schemas/io.k8s.X"})
        );
    }
}
