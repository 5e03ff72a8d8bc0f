//! Strategic merge patch, the subset kubectl and controllers use: maps merge recursively and
//! `null` deletes; a list is replaced whole unless the resource table gives it a strategy (merge by
//! key, or set-union of scalars); directives `$patch: replace|delete|merge`, `$retainKeys`,
//! `$deleteFromPrimitiveList/<f>` and `$setElementOrder/<f>` are honoured.

use serde_json::{Map, Value};

use crate::status::ApiError;
use crate::types::{ListType, Served};

const DELETE_PRIMITIVE: &str = "$deleteFromPrimitiveList/";
const SET_ORDER: &str = "$setElementOrder/";

/// `original` with the strategic `patch` applied.
pub fn apply(rt: &Served, original: &Value, patch: &Value) -> Result<Value, ApiError> {
    merge_value(rt, "", original, patch)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn merge_value(
    rt: &Served,
    path: &str,
    original: &Value,
    patch: &Value,
) -> Result<Value, ApiError> {
    match (original, patch) {
        (Value::Object(o), Value::Object(p)) => merge_map(rt, path, o, p),
        (_, Value::Object(p)) => merge_map(rt, path, &Map::new(), p),
        (_, p) => Ok(strip_directives(p)),
    }
}

fn strip_directives(v: &Value) -> Value {
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

fn merge_map(
    rt: &Served,
    path: &str,
    original: &Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<Value, ApiError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => return Ok(strip_directives(&Value::Object(patch.clone()))),
        Some("delete") => return Ok(Value::Null),
        Some("merge") | None => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Unknown patch type: {other}"
            )));
        }
    }
    let mut out = original.clone();
    for (k, pv) in patch {
        if k.starts_with('$') {
            continue;
        }
        if pv.is_null() {
            out.remove(k);
            continue;
        }
        let child = join(path, k);
        let merged = match (original.get(k), pv) {
            (Some(Value::Array(o)), Value::Array(p)) => merge_list(rt, &child, o, p)?,
            (None, Value::Array(p)) => merge_list(rt, &child, &[], p)?,
            (Some(ov), pv) => merge_value(rt, &child, ov, pv)?,
            (None, pv) => merge_value(rt, &child, &Value::Null, pv)?,
        };
        if merged.is_null() && pv.get("$patch").and_then(Value::as_str) == Some("delete") {
            out.remove(k);
        } else {
            out.insert(k.clone(), merged);
        }
    }
    for (k, pv) in patch {
        if let Some(field) = k.strip_prefix(DELETE_PRIMITIVE) {
            let remove: Vec<&Value> = pv
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            if let Some(Value::Array(list)) = out.get_mut(field) {
                list.retain(|v| !remove.contains(&v));
            }
        }
    }
    for (k, pv) in patch {
        if let Some(field) = k.strip_prefix(SET_ORDER)
            && let (Some(order), Some(Value::Array(list))) = (pv.as_array(), out.get_mut(field))
        {
            let key = rt.list_type(&join(path, field));
            reorder(list, order, key.as_ref());
        }
    }
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        out.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(Value::Object(out))
}

fn reorder(list: &mut [Value], order: &[Value], strategy: Option<&ListType>) {
    let rank = |v: &Value| -> usize {
        let pos = match strategy {
            Some(ListType::Map(keys)) => order
                .iter()
                .position(|o| keys.iter().all(|k| o.get(k) == v.get(k))),
            _ => order.iter().position(|o| o == v),
        };
        pos.unwrap_or(usize::MAX)
    };
    list.sort_by_key(|v| rank(v));
}

fn merge_list(
    rt: &Served,
    path: &str,
    original: &[Value],
    patch: &[Value],
) -> Result<Value, ApiError> {
    match rt.list_type(path) {
        None => Ok(Value::Array(
            patch
                .iter()
                .filter(|v| v.get("$patch").is_none())
                .map(strip_directives)
                .collect(),
        )),
        Some(ListType::Set) => {
            let mut out = original.to_vec();
            for v in patch {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            Ok(Value::Array(out))
        }
        Some(ListType::Map(keys)) => {
            // Strategic merge patch has one merge key per list (the built-ins' patchMergeKey).
            let Some(key) = keys.first().map(String::as_str) else {
                return Ok(Value::Array(patch.to_vec()));
            };
            if patch
                .iter()
                .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
            {
                return Ok(Value::Array(
                    patch
                        .iter()
                        .filter(|v| v.get("$patch").is_none())
                        .map(strip_directives)
                        .collect(),
                ));
            }
            // Upstream merges duplicate keys into one item and so drops e.g. a Node's second
            // InternalIP (kubernetes#79391); here items whose key repeats in the patch replace the
            // original items with that key, keeping every address.
            let keys: Vec<Option<&Value>> = patch.iter().map(|p| p.get(key)).collect();
            let dup = |k: &Value| keys.iter().filter(|x| **x == Some(k)).count() > 1;
            let mut out: Vec<Value> = original
                .iter()
                .filter(|o| o.get(key).is_none_or(|k| !dup(k)))
                .cloned()
                .collect();
            for p in patch {
                if p.get(key).is_some_and(dup) {
                    out.push(strip_directives(p));
                    continue;
                }
                let Some(k) = p.get(key) else {
                    return Err(ApiError::bad_request(format!(
                        "map: {p} does not contain declared merge key: {key}"
                    )));
                };
                let pos = out.iter().position(|o| o.get(key) == Some(k));
                let delete = p.get("$patch").and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(i), true) => {
                        out.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => out[i] = merge_value(rt, path, &out[i], p)?,
                    (None, false) => out.push(merge_value(rt, path, &Value::Null, p)?),
                }
            }
            Ok(Value::Array(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{TABLE, lookup};
    use serde_json::json;

    fn nodes() -> Served {
        Served::Builtin(&TABLE[lookup("", "v1", "nodes").unwrap()])
    }

    #[test]
    fn taints_are_replaced_whole_conditions_merge_by_type() {
        let node = json!({
            "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]}
        });
        let patch = json!({
            "spec": {"taints": [{"key": "c", "effect": "NoExecute"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "x"}]}
        });
        let out = apply(&nodes(), &node, &patch).unwrap();
        assert_eq!(
            out["spec"]["taints"],
            json!([{"key": "c", "effect": "NoExecute"}])
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([
                {"type": "Ready", "status": "False", "reason": "x"},
                {"type": "DiskPressure", "status": "False"}
            ])
        );
    }

    #[test]
    fn directives() {
        let node = json!({
            "metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n"}]}
        });
        let patch = json!({
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["c"], "labels": {"$patch": "replace", "z": "3"}},
            "status": {"addresses": [{"type": "Hostname", "$patch": "delete"}], "$setElementOrder/addresses": [{"type": "InternalIP"}]}
        });
        let out = apply(&nodes(), &node, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "c"]));
        assert_eq!(out["metadata"]["labels"], json!({"z": "3"}));
        assert_eq!(
            out["status"]["addresses"],
            json!([{"type": "InternalIP", "address": "10.0.0.1"}])
        );
        let out = apply(&nodes(), &node, &json!({"status": {"addresses": [{"$patch": "replace"}, {"type": "ExternalIP", "address": "1.2.3.4"}]}})).unwrap();
        assert_eq!(
            out["status"]["addresses"],
            json!([{"type": "ExternalIP", "address": "1.2.3.4"}])
        );
        let two = json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "InternalIP", "address": "10.0.0.3"}]}});
        let out = apply(&nodes(), &node, &two).unwrap();
        assert_eq!(
            out["status"]["addresses"],
            json!([
                {"type": "Hostname", "address": "n"},
                {"type": "InternalIP", "address": "10.0.0.2"},
                {"type": "InternalIP", "address": "10.0.0.3"}
            ])
        );
        let out = apply(
            &nodes(),
            &node,
            &json!({"spec": {"$retainKeys": ["a"], "a": 1, "b": 2}}),
        )
        .unwrap();
        assert_eq!(out["spec"], json!({"a": 1}));
    }
}
