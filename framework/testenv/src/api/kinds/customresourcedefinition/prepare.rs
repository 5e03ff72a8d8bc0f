//! The CRD strategy's PrepareForCreate / PrepareForUpdate: names and conversion defaults, the
//! empty status a new CRD starts with, and its storage version added to `storedVersions`.

use serde_json::{Value, json};

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

/// A new CRD (`old` is `None`) or a changed one.
pub(super) fn prepare(crd: &mut Value, old: Option<&Value>) {
    match old {
        None => prepare_create(crd),
        Some(_) => prepare_update(crd),
    }
}

/// A new CRD: defaults, and the status a CRD starts with (no conditions, no accepted names, its
/// storage version stored).
fn prepare_create(crd: &mut Value) {
    default_spec(crd);
    crd["status"] = json!({"conditions": null, "acceptedNames": {"plural": "", "kind": ""}});
    add_stored_version(crd);
}

/// A changed CRD: defaults again, and a new storage version joins `storedVersions`.
fn prepare_update(crd: &mut Value) {
    default_spec(crd);
    add_stored_version(crd);
}
