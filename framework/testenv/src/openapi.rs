//! A minimal OpenAPI v3 index: for each served group-version, one PATCH operation per resource
//! tagged with its group-version-kind and the `fieldValidation` query parameter. That is what
//! kubectl reads to decide that the server validates fields itself, so `kubectl apply` / `create`
//! work with their default `--validate=strict`. Custom resources also get their CRD's schema
//! (so `kubectl explain` works for them); built-in types have none, so client-side validation
//! is not served and kubectl computes apply patches from its built-in types (as it does for any
//! server without schemas).

use serde_json::{Map, Value, json};

use crate::types::{Registry, Served};

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
            schemas.insert(schema_name(&r), with_gvk(schema, &r));
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
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0-testenv"},
        "paths": paths,
        "components": {"schemas": schemas}
    }))
}

/// Upstream's name for a custom resource's schema: the reversed group, version and kind
/// (`com.example.stable.v1.Widget`).
fn schema_name(r: &Served) -> String {
    let mut group: Vec<&str> = r.group().split('.').collect();
    group.reverse();
    format!("{}.{}.{}", group.join("."), r.version(), r.kind())
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
