//! What decoding a patched object into its Go type does to the parts of a strategic merge patch
//! the merge took over as sent (a field the original lacks): directive keys (`$patch`, ...)
//! are unknown fields and vanish, and every required field a list element or struct lacks gets
//! its zero value (`{"$patch": "replace"}` becomes `{"type": "", "address": ""}` in a Node's
//! addresses). Built-in kinds only: custom resources take no strategic merge patch.

use serde_json::{Map, Value};

use crate::api::openapi::{self as builtin, KindSchema};
use crate::api::types::Served;

/// `raw`, the patch's value for the field at `path` (dotted, no list indices), as the typed
/// decode leaves it.
pub fn decode(rt: &Served, path: &str, raw: &Value) -> Value {
    let mut v = strip_directives(raw);
    drop_nulls(&mut v);
    if rt.custom().is_none()
        && let Some(ks) = builtin::schema(rt.group(), rt.version(), rt.kind())
        && let Some(schema) = schema_at(&ks, path)
    {
        zero_fill(&ks, schema, &mut v);
    }
    v
}

/// A copy of `v` without strategic-merge directive keys.
pub fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// A null in a part taken as sent deletes nothing and sets nothing (upstream's
/// `discardNullValuesFromPatch`).
fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

fn schema_at<'a>(ks: &'a KindSchema, path: &str) -> Option<&'a Value> {
    let mut node = ks.resolve(ks.root_schema()?);
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        if let Some(items) = node.get("items") {
            node = ks.resolve(items);
        }
        node = ks.resolve(node.get("properties")?.get(seg)?);
    }
    Some(node)
}

fn type_of(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(t) => Some(t),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    }
}

fn zero(ks: &KindSchema, schema: &Value) -> Option<Value> {
    let schema = ks.resolve(schema);
    match type_of(schema)? {
        "string" => Some("".into()),
        "integer" | "number" => Some(0.into()),
        "boolean" => Some(false.into()),
        "object" if schema.get("properties").is_some() => {
            let mut v = Value::Object(Map::new());
            zero_fill(ks, schema, &mut v);
            Some(v)
        }
        _ => None,
    }
}

fn zero_fill(ks: &KindSchema, schema: &Value, v: &mut Value) {
    let schema = ks.resolve(schema);
    match v {
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                items.iter_mut().for_each(|i| zero_fill(ks, item, i));
            }
        }
        Value::Object(m) => {
            let Some(props) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            let required = schema.get("required").and_then(Value::as_array);
            for key in required.into_iter().flatten().filter_map(Value::as_str) {
                if !m.contains_key(key)
                    && let Some(z) = props.get(key).and_then(|s| zero(ks, s))
                {
                    m.insert(key.to_string(), z);
                }
            }
            for (k, child) in m.iter_mut() {
                if let Some(s) = props.get(k) {
                    zero_fill(ks, s, child);
                }
            }
        }
        _ => {}
    }
}
