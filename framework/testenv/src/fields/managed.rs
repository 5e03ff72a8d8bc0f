//! `metadata.managedFields`: its entries as kube-apiserver encodes them, who owns what after an
//! apply or an ordinary write, and the 409 an apply gets when it would change another manager's
//! field.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::set::{FieldSet, Path, path_string};
use super::walk::{self, Ctx};
use crate::api::status::ApiError;

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// `manager`.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// `apiVersion` of the write.
    pub api_version: String,
    /// `time` (RFC 3339, seconds).
    pub time: String,
    /// `subresource`, when the write went through one.
    pub subresource: Option<String>,
    /// `fieldsV1`.
    pub set: FieldSet,
}

impl Entry {
    /// Whether `self` and `other` are one manager: appliers regardless of apiVersion, updaters
    /// per apiVersion (upstream's `BuildManagerIdentifier`).
    fn same_manager(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == "Apply" || self.api_version == other.api_version)
    }

    fn is_apply(&self) -> bool {
        self.operation == "Apply"
    }

    /// How conflict messages name the manager (upstream's `printManager`).
    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            let _ = write!(s, " with subresource {sub:?}");
        }
        if !self.is_apply() {
            let _ = write!(s, " using {}", self.api_version);
        }
        s
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.set.to_fields_v1(),
        });
        if let Some(sub) = &self.subresource {
            v["subresource"] = sub.clone().into();
        }
        v
    }

    fn from_json(v: &Value) -> Option<Entry> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Entry {
            manager: s("manager").unwrap_or_default(),
            operation: s("operation")?,
            api_version: s("apiVersion").unwrap_or_default(),
            time: s("time").unwrap_or_default(),
            subresource: s("subresource").filter(|s| !s.is_empty()),
            set: FieldSet::from_fields_v1(v.get("fieldsV1")?)?,
        })
    }
}

/// Reads `managedFields`; anything undecodable counts as none (upstream resets it then).
pub fn decode(v: Option<&Value>) -> Vec<Entry> {
    let Some(items) = v.and_then(Value::as_array) else {
        return Vec::new();
    };
    items
        .iter()
        .map(Entry::from_json)
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default()
}

/// Whether a write asks to clear ownership: `managedFields: [{}]`.
pub fn is_reset(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array)
        .is_some_and(|a| a.len() == 1 && a[0].as_object().is_some_and(|m| m.is_empty()))
}

/// The entries as stored: empty ones dropped, in upstream's order (operation, time, manager,
/// apiVersion, subresource).
pub fn encode(mut entries: Vec<Entry>) -> Option<Value> {
    entries.retain(|e| !e.set.is_empty());
    if entries.is_empty() {
        return None;
    }
    entries.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    Some(Value::Array(entries.iter().map(Entry::to_json).collect()))
}

/// Who is writing.
#[derive(Debug, Clone, Copy)]
pub struct Writer<'a> {
    /// The field manager.
    pub manager: &'a str,
    /// `apiVersion` of the type.
    pub api_version: &'a str,
    /// `Some("status")` through `/status`.
    pub subresource: Option<&'a str>,
    /// The write's time.
    pub now: &'a str,
}

impl Writer<'_> {
    fn entry(&self, operation: &str) -> Entry {
        Entry {
            manager: self.manager.to_string(),
            operation: operation.to_string(),
            api_version: self.api_version.to_string(),
            time: self.now.to_string(),
            subresource: self.subresource.map(str::to_string),
            set: FieldSet::new(),
        }
    }
}

/// Replaces the writer's entry with one holding `set`, keeping its time when nothing changed.
fn put(entries: &mut Vec<Entry>, mine: Entry, set: FieldSet, now: &str) {
    match entries.iter_mut().find(|e| e.same_manager(&mine)) {
        Some(e) => {
            if e.set != set {
                e.set = set;
                e.time = now.to_string();
                e.api_version = mine.api_version;
            }
        }
        None => entries.push(Entry { set, ..mine }),
    }
}

/// Ownership after an ordinary write (create, update, any non-apply patch) turned `old` into
/// `new`: the writer's `Update` entry gains what it added or changed, every other manager loses
/// what the write changed or removed. `requested` is the `managedFields` the request sent.
pub fn after_update(
    ctx: Ctx<'_>,
    old: &Value,
    new: &Value,
    requested: Option<&Value>,
    w: Writer<'_>,
) -> Option<Value> {
    let mut entries = if is_reset(requested) {
        Vec::new()
    } else {
        // A client that sends no managedFields keeps the stored ones (so clients that do not
        // know about them cannot wipe them); one that sends them sets them.
        let sent = decode(requested);
        if sent.is_empty() || w.subresource.is_some() {
            decode(old.pointer("/metadata/managedFields"))
        } else {
            sent
        }
    };
    if entries.is_empty() && !ctx.creating {
        // An object that carries no managedFields stays untracked by ordinary writes (upstream's
        // skip-non-applied manager: clearing them opts the object out until the next apply).
        return None;
    }
    let ch = walk::compare(ctx, old, new);
    let touched = ch.added.union(&ch.modified);
    let lost = touched.union(&ch.removed);
    let mine = w.entry("Update");
    for e in entries.iter_mut().filter(|e| !e.same_manager(&mine)) {
        e.set = e.set.difference(&lost);
    }
    let before = entries
        .iter()
        .find(|e| e.same_manager(&mine))
        .map(|e| e.set.clone())
        .unwrap_or_default();
    let set = before.difference(&ch.removed).union(&touched);
    put(&mut entries, mine, set, w.now);
    encode(entries)
}

/// A server-side apply of `config` onto `live` (`None`: the apply creates the object): the
/// merged object, and its `managedFields`. Fields of other managers that the apply would change
/// are a 409 unless `force`, which takes them over.
pub fn apply(
    ctx: Ctx<'_>,
    live: Option<&Value>,
    config: &Value,
    w: Writer<'_>,
    force: bool,
) -> Result<(Value, Option<Value>), ApiError> {
    let claimed = walk::applied_set(ctx, config);
    let Some(live) = live else {
        let mut entries = Vec::new();
        put(&mut entries, w.entry("Apply"), claimed, w.now);
        return Ok((config.clone(), encode(entries)));
    };
    let mut entries = decode(live.pointer("/metadata/managedFields"));
    let mine = w.entry("Apply");
    let last = entries
        .iter()
        .find(|e| e.same_manager(&mine))
        .map(|e| e.set.clone())
        .unwrap_or_default();
    let mut merged = walk::merge(ctx, live, config);

    // Fields this applier stopped sending go, unless someone else still owns them.
    let others = entries
        .iter()
        .filter(|e| !e.same_manager(&mine))
        .fold(FieldSet::new(), |acc, e| acc.union(&e.set));
    walk::remove(&mut merged, &last.difference(&claimed), &others);

    let ch = walk::compare(ctx, live, &merged);
    let changed = ch.added.union(&ch.modified);
    let mut conflicts: Vec<(String, Path)> = Vec::new();
    for e in entries.iter().filter(|e| !e.same_manager(&mine)) {
        for path in e.set.intersection(&changed).paths() {
            conflicts.push((e.describe(), path));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(conflicts));
    }
    for e in entries.iter_mut().filter(|e| !e.same_manager(&mine)) {
        e.set = e.set.difference(&changed).difference(&ch.removed);
    }
    put(&mut entries, mine, claimed, w.now);
    Ok((merged, encode(entries)))
}

/// The 409 upstream answers an apply that conflicts (its `NewConflictError` wording).
fn conflict_error(mut conflicts: Vec<(String, Path)>) -> ApiError {
    conflicts.sort();
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(manager, path)| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {manager}"),
                "field": path_string(path),
            })
        })
        .collect();
    let message = if let [(manager, path)] = conflicts.as_slice() {
        format!(
            "Apply failed with 1 conflict: conflict with {manager}: {}",
            path_string(path)
        )
    } else {
        let mut lines: Vec<String> = Vec::new();
        let mut current: Option<&str> = None;
        for (manager, path) in &conflicts {
            if current != Some(manager.as_str()) {
                lines.push(format!("conflicts with {manager}:"));
                current = Some(manager);
            }
            lines.push(format!("- {}", path_string(path)));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    ApiError::apply_conflict(message, causes)
}
