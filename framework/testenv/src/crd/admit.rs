//! What the server does to a write before storing it, for CRDs (names and conversion defaults,
//! an empty status with `storedVersions`) and for custom resources (their version's structural
//! schema: prune, default, validate).

use serde_json::{Value, json};

use crate::api::status::Cause;
use crate::api::types::Served;

/// The CRD's storage version (the one with `storage: true`), if exactly one is marked.
pub fn storage_version(crd: &Value) -> Option<String> {
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array)?;
    let mut storage = versions.iter().filter(|v| v["storage"] == true);
    let first = storage.next()?;
    if storage.next().is_some() {
        return None;
    }
    first.get("name").and_then(Value::as_str).map(String::from)
}

/// `spec.names` defaults (singular, listKind) and the `None` conversion strategy.
fn default_spec(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let empty = |names: &serde_json::Map<String, Value>, k: &str| {
            names
                .get(k)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        };
        if empty(names, "singular") && !kind.is_empty() {
            names.insert("singular".into(), kind.to_lowercase().into());
        }
        if empty(names, "listKind") && !kind.is_empty() {
            names.insert("listKind".into(), format!("{kind}List").into());
        }
    }
    if !spec.get("conversion").is_some_and(Value::is_object) {
        spec.insert("conversion".into(), json!({"strategy": "None"}));
    }
}

fn add_stored_version(crd: &mut Value) {
    let Some(storage) = storage_version(crd) else {
        return;
    };
    if !crd.get("status").is_some_and(Value::is_object) {
        crd["status"] = json!({});
    }
    let stored = &mut crd["status"]["storedVersions"];
    if !stored.is_array() {
        *stored = json!([]);
    }
    if let Some(list) = stored.as_array_mut()
        && !list.iter().any(|v| v == storage.as_str())
    {
        list.push(storage.into());
    }
}

/// A new CRD: defaults, and the status a CRD starts with (no conditions, no accepted names, its
/// storage version stored).
pub fn prepare_create(crd: &mut Value) {
    default_spec(crd);
    crd["status"] = json!({"conditions": null, "acceptedNames": {"plural": "", "kind": ""}});
    add_stored_version(crd);
}

/// A changed CRD: defaults again, and a new storage version joins `storedVersions`.
pub fn prepare_update(crd: &mut Value) {
    default_spec(crd);
    add_stored_version(crd);
}

/// A new custom resource: with a status subresource, create cannot set status (upstream's
/// custom resource strategy drops it).
pub fn prepare_create_custom(rt: &Served, obj: &mut Value) {
    if rt.status_subresource()
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    apply_schema(rt, obj);
}

/// Prunes unknown fields and applies defaults from the version's structural schema.
pub fn apply_schema(rt: &Served, obj: &mut Value) {
    if let Some(schema) = rt.custom().and_then(|c| c.schema.as_ref()) {
        schema.prune_root(obj);
        schema.apply_defaults(obj);
    }
}

/// The 422 causes for a custom resource, in the server's order: its schema's, then its CEL
/// rules' (`old`: the stored object, on an update).
pub fn validate(rt: &Served, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let Some(custom) = rt.custom() else {
        return Vec::new();
    };
    let Some(schema) = custom.schema.as_ref() else {
        return Vec::new();
    };
    let mut causes = schema.validate_root(obj);
    if let Some(rules) = &custom.rules {
        causes.extend(crate::api::cel::validate::validate(rules, schema, obj, old));
    }
    causes
}
