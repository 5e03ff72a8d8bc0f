//! Walks over objects by their type's shape: the field set an apply configuration claims, the
//! fields an ordinary write added, changed and removed, the merge of an apply configuration into
//! the live object, and the removal of fields an applier gave up.

use serde_json::{Map, Value};

use super::set::{FieldSet, Path, Step, canonical_json};
use super::shape::{self, KEY_DEFAULTS, ListKind, ObjectKind};
use crate::api::types::Served;

/// The type and the endpoint a walk is for.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    /// The object's type.
    pub rt: &'a Served,
    /// `Some("status")` for writes through `/status`.
    pub subresource: Option<&'a str>,
    /// Whether the write creates the object (registry-allocated fields are then nobody's).
    pub creating: bool,
}

enum Node {
    Leaf,
    Object(ObjectKind),
    List(ListKind),
}

impl Ctx<'_> {
    fn classify(&self, dotted: &str, v: &Value) -> Node {
        match v {
            Value::Object(_) => match shape::object_kind(self.rt, dotted) {
                ObjectKind::Atomic => Node::Leaf,
                kind => Node::Object(kind),
            },
            Value::Array(_) => match shape::list_kind(self.rt, dotted) {
                ListKind::Atomic => Node::Leaf,
                kind => Node::List(kind),
            },
            _ => Node::Leaf,
        }
    }

    /// Whether nobody owns the field at `dotted` through this write.
    fn skipped(&self, dotted: &str) -> bool {
        let top = dotted.split('.').next().unwrap_or("");
        shape::unowned(dotted)
            || !shape::in_scope(self.rt, self.subresource, top)
            || (self.creating && shape::allocated_on_create(self.rt, dotted))
    }
}

fn join(dotted: &str, field: &str) -> String {
    if dotted.is_empty() {
        field.to_string()
    } else {
        format!("{dotted}.{field}")
    }
}

fn key_value(item: &Value, key: &str) -> Option<Value> {
    item.get(key).cloned().or_else(|| {
        KEY_DEFAULTS
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, d)| Value::String((*d).to_string()))
    })
}

/// The step that names `item` (at position `index`) in a list of `kind`.
fn item_step(kind: &ListKind, item: &Value, index: usize) -> Step {
    match kind {
        ListKind::Set => Step::Value(canonical_json(item)),
        ListKind::Map(keys) => {
            let fields: Map<String, Value> = keys
                .iter()
                .filter_map(|k| key_value(item, k).map(|v| (k.to_string(), v)))
                .collect();
            if fields.is_empty() {
                Step::Index(index)
            } else {
                Step::Key(canonical_json(&Value::Object(fields)))
            }
        }
        ListKind::Atomic => Step::Index(index),
    }
}

fn items_by_step<'v>(kind: &ListKind, list: &'v [Value]) -> Vec<(Step, &'v Value)> {
    list.iter()
        .enumerate()
        .map(|(i, item)| (item_step(kind, item, i), item))
        .collect()
}

/// The fields an apply configuration claims: its leaves and list items, never the maps and
/// structs that merely contain them (cm-apply-create.txt: `f:data` with `f:a`, no `.`).
pub fn applied_set(ctx: Ctx<'_>, config: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    walk_fields(ctx, config, &mut Vec::new(), "", &mut out, false);
    out
}

/// Every field of `v` (a struct or map at `dotted`) into `out`; `whole` also claims the
/// containers themselves, as an ordinary write that adds them does.
fn walk_fields(
    ctx: Ctx<'_>,
    v: &Value,
    steps: &mut Path,
    dotted: &str,
    out: &mut FieldSet,
    whole: bool,
) {
    let Some(map) = v.as_object() else { return };
    for (k, child) in map {
        let d = join(dotted, k);
        if ctx.skipped(&d) {
            continue;
        }
        steps.push(Step::Field(k.clone()));
        walk_value(ctx, child, steps, &d, out, whole);
        steps.pop();
    }
}

fn walk_value(
    ctx: Ctx<'_>,
    v: &Value,
    steps: &mut Path,
    dotted: &str,
    out: &mut FieldSet,
    whole: bool,
) {
    match ctx.classify(dotted, v) {
        Node::Leaf => out.insert(steps),
        Node::Object(kind) => {
            let empty = v.as_object().is_none_or(Map::is_empty);
            let added_whole =
                whole && (kind == ObjectKind::Map || !shape::always_present(ctx.rt, dotted));
            if empty || added_whole {
                out.insert(steps);
            }
            walk_fields(ctx, v, steps, dotted, out, whole);
        }
        Node::List(kind) => {
            let items = v.as_array().map(Vec::as_slice).unwrap_or_default();
            if items.is_empty() || whole {
                out.insert(steps);
            }
            for (step, item) in items_by_step(&kind, items) {
                steps.push(step);
                out.insert(steps);
                if matches!(kind, ListKind::Map(_)) {
                    walk_fields(ctx, item, steps, dotted, out, whole);
                }
                steps.pop();
            }
        }
    }
}

/// What an ordinary write did, field by field.
#[derive(Debug, Default)]
pub struct Changes {
    /// Fields that are new (with the maps and lists that came with them).
    pub added: FieldSet,
    /// Leaves whose value changed.
    pub modified: FieldSet,
    /// Fields that are gone.
    pub removed: FieldSet,
}

/// Compares two states of an object.
pub fn compare(ctx: Ctx<'_>, old: &Value, new: &Value) -> Changes {
    let mut ch = Changes::default();
    compare_fields(ctx, Some(old), Some(new), &mut Vec::new(), "", &mut ch);
    ch
}

fn compare_fields(
    ctx: Ctx<'_>,
    old: Option<&Value>,
    new: Option<&Value>,
    steps: &mut Path,
    dotted: &str,
    ch: &mut Changes,
) {
    let empty = Map::new();
    let o = old.and_then(Value::as_object).unwrap_or(&empty);
    let n = new.and_then(Value::as_object).unwrap_or(&empty);
    let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let d = join(dotted, k);
        if ctx.skipped(&d) {
            continue;
        }
        steps.push(Step::Field(k.clone()));
        compare_value(ctx, o.get(k.as_str()), n.get(k.as_str()), steps, &d, ch);
        steps.pop();
    }
}

fn compare_value(
    ctx: Ctx<'_>,
    old: Option<&Value>,
    new: Option<&Value>,
    steps: &mut Path,
    dotted: &str,
    ch: &mut Changes,
) {
    // A null list or map is an empty one that is there (Go's nil slice, crd-get-established.txt:
    // conditions filled in later own their items, not the list).
    let empty_like = |v: &Value| match v {
        Value::Array(_) => Value::Array(Vec::new()),
        Value::Object(_) => Value::Object(Map::new()),
        other => other.clone(),
    };
    let (old_filled, new_filled);
    let (old, new) = match (old, new) {
        (Some(Value::Null), Some(n)) if n.is_array() || n.is_object() => {
            old_filled = empty_like(n);
            (Some(&old_filled), Some(n))
        }
        (Some(o), Some(Value::Null)) if o.is_array() || o.is_object() => {
            new_filled = empty_like(o);
            (Some(o), Some(&new_filled))
        }
        other => other,
    };
    let (o, n) = match (old, new) {
        (None, None) => return,
        (None, Some(n)) => return walk_value(ctx, n, steps, dotted, &mut ch.added, true),
        (Some(o), None) => return walk_value(ctx, o, steps, dotted, &mut ch.removed, true),
        (Some(o), Some(n)) => (o, n),
    };
    match (ctx.classify(dotted, o), ctx.classify(dotted, n)) {
        (Node::Object(_), Node::Object(_)) => {
            compare_fields(ctx, Some(o), Some(n), steps, dotted, ch)
        }
        (Node::List(kind), Node::List(_)) => {
            let os = items_by_step(&kind, o.as_array().map(Vec::as_slice).unwrap_or_default());
            let ns = items_by_step(&kind, n.as_array().map(Vec::as_slice).unwrap_or_default());
            for (step, item) in &ns {
                steps.push(step.clone());
                match os.iter().find(|(s, _)| s == step) {
                    None => {
                        ch.added.insert(steps);
                        if matches!(kind, ListKind::Map(_)) {
                            walk_fields(ctx, item, steps, dotted, &mut ch.added, true);
                        }
                    }
                    Some((_, before)) if matches!(kind, ListKind::Map(_)) => {
                        compare_fields(ctx, Some(before), Some(item), steps, dotted, ch);
                    }
                    Some(_) => {}
                }
                steps.pop();
            }
            for (step, item) in &os {
                if ns.iter().any(|(s, _)| s == step) {
                    continue;
                }
                steps.push(step.clone());
                ch.removed.insert(steps);
                if matches!(kind, ListKind::Map(_)) {
                    walk_fields(ctx, item, steps, dotted, &mut ch.removed, true);
                }
                steps.pop();
            }
        }
        _ => {
            if o != n {
                ch.modified.insert(steps);
            }
        }
    }
}

/// An apply configuration merged into the live object: fields it names replace theirs, map-list
/// items merge by key, set-lists take the union, atomic values are replaced.
pub fn merge(ctx: Ctx<'_>, live: &Value, config: &Value) -> Value {
    merge_value(ctx, "", Some(live), config)
}

fn merge_value(ctx: Ctx<'_>, dotted: &str, live: Option<&Value>, config: &Value) -> Value {
    let Some(live) = live else {
        return config.clone();
    };
    match ctx.classify(dotted, config) {
        Node::Object(_) if live.is_object() => merge_fields(ctx, dotted, live, config),
        Node::List(kind) if live.is_array() => {
            let mut out: Vec<Value> = live.as_array().cloned().unwrap_or_default();
            let config_items = config.as_array().map(Vec::as_slice).unwrap_or_default();
            for (i, item) in config_items.iter().enumerate() {
                let step = item_step(&kind, item, i);
                let found = (0..out.len()).find(|&j| item_step(&kind, &out[j], j) == step);
                match (found, &kind) {
                    (Some(j), ListKind::Map(_)) => {
                        out[j] = merge_fields(ctx, dotted, &out[j], item)
                    }
                    (Some(_), _) => {}
                    (None, _) => out.push(item.clone()),
                }
            }
            Value::Array(out)
        }
        _ => config.clone(),
    }
}

fn merge_fields(ctx: Ctx<'_>, dotted: &str, live: &Value, config: &Value) -> Value {
    let mut out = live.as_object().cloned().unwrap_or_default();
    for (k, c) in config.as_object().into_iter().flatten() {
        let merged = merge_value(ctx, &join(dotted, k), out.get(k), c);
        out.insert(k.clone(), merged);
    }
    Value::Object(out)
}

/// Removes each member of `drop` from `obj`, except those `keep` owns anything under.
pub fn remove(obj: &mut Value, drop: &FieldSet, keep: &FieldSet) {
    for path in drop.paths() {
        if !path.is_empty() && !keep.touches(&path) {
            remove_at(obj, &path);
        }
    }
}

fn step_matches(step: &Step, item: &Value, index: usize) -> bool {
    match step {
        Step::Field(_) => false,
        Step::Index(i) => *i == index,
        Step::Value(v) => canonical_json(item) == *v,
        Step::Key(k) => {
            let fields: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            !fields.is_empty()
                && fields
                    .iter()
                    .all(|(name, want)| key_value(item, name).as_ref() == Some(want))
        }
    }
}

fn remove_at(v: &mut Value, path: &[Step]) {
    let Some((step, rest)) = path.split_first() else {
        return;
    };
    match (step, v) {
        (Step::Field(f), Value::Object(map)) => {
            if rest.is_empty() {
                map.remove(f);
            } else if let Some(child) = map.get_mut(f) {
                remove_at(child, rest);
            }
        }
        (step, Value::Array(items)) => {
            let Some(i) = (0..items.len()).find(|&i| step_matches(step, &items[i], i)) else {
                return;
            };
            if rest.is_empty() {
                items.remove(i);
            } else {
                remove_at(&mut items[i], rest);
            }
        }
        _ => {}
    }
}
