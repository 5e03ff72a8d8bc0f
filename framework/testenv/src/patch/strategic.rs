//! Strategic merge patch, the subset kubectl and controllers use: maps merge recursively and
//! `null` deletes; a list is replaced whole unless its kind gives it a strategy (merge by key, or
//! set-union of scalars); directives `$patch: replace|delete|merge`, `$retainKeys`,
//! `$deleteFromPrimitiveList/<f>` and `$setElementOrder/<f>` are honoured, with upstream's errors
//! (a bad `$patch` is a 500, an unlisted `$retainKeys` field a 400).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::typed::{self, strip_directives};
use crate::api::status::{ApiError, go_value};
use crate::api::types::{ListType, Served};

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
        Some(other) => return Err(bad_patch_type(other, patch)),
    }
    let mut out = original.clone();
    if let Some(keep) = patch.get("$retainKeys") {
        retain_keys(&mut out, keep, patch)?;
    }
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
            // A field the original lacks takes the patch's value as sent, directives included,
            // and the typed decode then makes of it what Go's decoder would (upstream's
            // `mergeMap`); the server never stores an empty list, so `[]` counts as absent.
            (None | Some(Value::Null), pv) => typed::decode(rt, &child, pv),
            (Some(Value::Array(o)), Value::Array(_)) if o.is_empty() => {
                typed::decode(rt, &child, pv)
            }
            (Some(Value::Array(o)), Value::Array(p)) => merge_list(rt, &child, o, p)?,
            (Some(ov), pv) => merge_value(rt, &child, ov, pv)?,
        };
        let deleted =
            merged.is_null() && pv.get("$patch").and_then(Value::as_str) == Some("delete");
        // An empty list is dropped, as the typed object's `omitempty` drops it.
        let emptied = merged.as_array().is_some_and(Vec::is_empty);
        if deleted || emptied {
            out.remove(k);
        } else {
            out.insert(k.clone(), merged);
        }
    }
    for (k, pv) in patch {
        if let Some(field) = k.strip_prefix(DELETE_PRIMITIVE) {
            let remove: HashSet<String> = pv.as_array().into_iter().flatten().map(ident).collect();
            if let Some(Value::Array(list)) = out.get_mut(field) {
                list.retain(|v| !remove.contains(&ident(v)));
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
    Ok(Value::Object(out))
}

/// upstream's `ErrBadPatchType`: a plain error, so a 500 without a reason.
fn bad_patch_type(directive: &str, m: &Map<String, Value>) -> ApiError {
    ApiError::unknown(format!(
        "unknown patch type: {directive} in map: {}",
        go_value(&Value::Object(m.clone()))
    ))
}

/// `$retainKeys`: a list naming every field the patch sets; the original keeps only those.
fn retain_keys(
    out: &mut Map<String, Value>,
    keep: &Value,
    patch: &Map<String, Value>,
) -> Result<(), ApiError> {
    let refused = || ApiError::bad_request("invalid patch format of retainKeys");
    let keep: Vec<&Value> = keep.as_array().ok_or_else(refused)?.iter().collect();
    let listed = |k: &str| keep.iter().any(|v| v.as_str() == Some(k));
    let unlisted = patch
        .iter()
        .any(|(k, v)| !v.is_null() && !k.starts_with('$') && !listed(k));
    if unlisted {
        return Err(refused());
    }
    out.retain(|k, _| listed(k));
    Ok(())
}

/// `$setElementOrder`: the list sorted by each item's first place in `order` (by its merge keys,
/// or whole), items it does not name last; one pass over each list.
fn reorder(list: &mut [Value], order: &[Value], strategy: Option<&ListType>) {
    let id = |v: &Value| match strategy {
        Some(ListType::Map(keys)) => ident(&Value::Array(
            keys.iter()
                .map(|k| v.get(k).cloned().unwrap_or(Value::Null))
                .collect(),
        )),
        _ => ident(v),
    };
    let mut rank: HashMap<String, usize> = HashMap::with_capacity(order.len());
    for (i, o) in order.iter().enumerate() {
        rank.entry(id(o)).or_insert(i);
    }
    list.sort_by_cached_key(|v| rank.get(&id(v)).copied().unwrap_or(usize::MAX));
}

/// A value's identity for hashing: its JSON text (maps are sorted, so equal values match).
fn ident(v: &Value) -> String {
    v.to_string()
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
            let mut seen: HashSet<String> = out.iter().map(ident).collect();
            for v in patch {
                if seen.insert(ident(v)) {
                    out.push(v.clone());
                }
            }
            Ok(Value::Array(upstream_order(out, patch, original, |v| {
                Some(ident(v))
            })))
        }
        Some(ListType::Map(keys)) => {
            // Strategic merge patch has one merge key per list (the built-ins' patchMergeKey).
            let Some(key) = keys.first().map(String::as_str) else {
                return Ok(Value::Array(patch.to_vec()));
            };
            for p in patch {
                match p.get("$patch").and_then(Value::as_str) {
                    None | Some("replace" | "delete") => {}
                    Some("merge") => {
                        return Err(ApiError::unknown(
                            "merging lists cannot yet be specified in the patch",
                        ));
                    }
                    Some(other) => {
                        return Err(bad_patch_type(other, p.as_object().unwrap_or(&Map::new())));
                    }
                }
            }
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
            // As upstream's mergeSlice: first every `$patch: delete` removes all items with its
            // key (deleteMatchingEntries), then each other patch item merges into the first item
            // with its key, so a key the patch repeats folds into one item (a Node's second
            // InternalIP is lost, kubernetes#79391).
            let is_delete = |p: &Value| p.get("$patch").and_then(Value::as_str) == Some("delete");
            let (deletes, merges): (Vec<&Value>, Vec<&Value>) =
                patch.iter().partition(|p| is_delete(p));
            let mut deleted = HashSet::new();
            let mut merged = Vec::with_capacity(merges.len());
            for p in deletes.into_iter().chain(merges) {
                let Some(k) = p.get(key) else {
                    return Err(ApiError::unknown(format!(
                        "map: {} does not contain declared merge key: {key}",
                        go_value(p)
                    )));
                };
                match is_delete(p) {
                    true => drop(deleted.insert(ident(k))),
                    false => merged.push((ident(k), p)),
                }
            }
            let mut out: Vec<Value> = original
                .iter()
                .filter(|o| o.get(key).is_none_or(|k| !deleted.contains(&ident(k))))
                .cloned()
                .collect();
            // The first item with each key, as upstream's lookup finds it.
            let mut at: HashMap<String, usize> = HashMap::with_capacity(out.len());
            for (i, o) in out.iter().enumerate() {
                if let Some(k) = o.get(key) {
                    at.entry(ident(k)).or_insert(i);
                }
            }
            for (k, p) in merged {
                match at.get(&k) {
                    Some(&i) => out[i] = merge_value(rt, path, &out[i], p)?,
                    None => {
                        at.insert(k, out.len());
                        out.push(merge_value(rt, path, &Value::Null, p)?);
                    }
                }
            }
            let id = |v: &Value| v.get(key).map(ident);
            Ok(Value::Array(upstream_order(out, patch, original, id)))
        }
    }
}

/// The merged list in upstream's order (`normalizeElementOrder`): the items the patch names in
/// its order, with the items only the original had slotted in before the first patch item they
/// preceded in the original.
fn upstream_order(
    merged: Vec<Value>,
    patch: &[Value],
    original: &[Value],
    id: impl Fn(&Value) -> Option<String>,
) -> Vec<Value> {
    let positions = |list: &[Value]| {
        let mut at: HashMap<String, usize> = HashMap::with_capacity(list.len());
        for (i, v) in list.iter().enumerate() {
            if let Some(k) = id(v) {
                at.entry(k).or_insert(i);
            }
        }
        at
    };
    let (in_patch, in_original) = (positions(patch), positions(original));
    let keyed: Vec<(Option<String>, Value)> = merged.into_iter().map(|v| (id(&v), v)).collect();
    let place = |at: &HashMap<String, usize>, k: &Option<String>| {
        k.as_ref().and_then(|k| at.get(k).copied())
    };
    let (mut named, server_only): (Vec<_>, Vec<_>) = keyed
        .into_iter()
        .partition(|(k, _)| place(&in_patch, k).is_some());
    named.sort_by_key(|(k, _)| place(&in_patch, k));
    let mut out = Vec::with_capacity(named.len() + server_only.len());
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        named.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (Some((l, _)), Some((r, _))) => matches!(
                (place(&in_original, l), place(&in_original, r)),
                (Some(a), Some(b)) if a < b
            ),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        out.extend(if take_left { left.next() } else { right.next() }.map(|(_, v)| v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kinds::{TABLE, lookup};
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
    fn a_directive_taken_as_sent_decodes_to_a_zero_element() {
        let replace = json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"$patch": "replace"}]}});
        let out = apply(&nodes(), &json!({"status": {}}), &replace).unwrap();
        assert_eq!(
            out["status"]["addresses"],
            json!([{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "", "address": ""}])
        );
        let services = Served::Builtin(&TABLE[lookup("", "v1", "services").unwrap()]);
        let out = apply(
            &services,
            &json!({"spec": {}}),
            &json!({"spec": {"ports": [{"$patch": "replace"}]}}),
        )
        .unwrap();
        assert_eq!(out["spec"]["ports"], json!([{"port": 0}]));
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
        assert_eq!(out["metadata"]["finalizers"], json!(["c", "b"]));
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
        // A repeated merge key folds into one item, the last one winning (kubernetes#79391).
        let out = apply(&nodes(), &node, &two).unwrap();
        assert_eq!(
            out["status"]["addresses"],
            json!([
                {"type": "InternalIP", "address": "10.0.0.3"},
                {"type": "Hostname", "address": "n"}
            ])
        );
        // Over an absent list the patch is taken as sent, repeats included.
        let out = apply(&nodes(), &json!({"status": {}}), &two).unwrap();
        assert_eq!(out["status"]["addresses"], two["status"]["addresses"]);
        // A delete removes every item with its key, also the repeats a JSON merge patch stored.
        let dual = json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "InternalIP", "address": "fd00::1"}, {"type": "Hostname", "address": "n"}]}});
        let delete = json!({"status": {"addresses": [{"type": "InternalIP", "$patch": "delete"}]}});
        let out = apply(&nodes(), &dual, &delete).unwrap();
        assert_eq!(
            out["status"]["addresses"],
            json!([{"type": "Hostname", "address": "n"}])
        );
        // Deletes go first, whatever their place in the patch.
        let readd = json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.9"}, {"type": "InternalIP", "$patch": "delete"}]}});
        let out = apply(&nodes(), &dual, &readd).unwrap();
        assert_eq!(
            out["status"]["addresses"],
            json!([{"type": "InternalIP", "address": "10.0.0.9"}, {"type": "Hostname", "address": "n"}])
        );
        let out = apply(
            &nodes(),
            &json!({"spec": {"a": 0, "b": 2}}),
            &json!({"spec": {"$retainKeys": ["a"], "a": 1}}),
        )
        .unwrap();
        assert_eq!(out["spec"], json!({"a": 1}));
        let refused = apply(
            &nodes(),
            &json!({"spec": {"a": 0}}),
            &json!({"spec": {"$retainKeys": ["a"], "b": 2}}),
        );
        assert_eq!(refused.unwrap_err().code, 400);
    }
}
