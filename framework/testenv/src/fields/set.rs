//! A set of field paths, as server-side apply tracks ownership: the tree behind each
//! `managedFields[].fieldsV1`, its FieldsV1 JSON form (`f:`, `k:`, `v:`, `i:`, `.`), and the path
//! strings conflict messages print (`.spec.ports[port=80,protocol="TCP"].name`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// A field of a struct or a key of a map: `f:name`.
    Field(String),
    /// An item of a map-list, by its key fields as compact JSON with sorted keys: `k:{"type":"Ready"}`.
    Key(String),
    /// An item of a set-list, by its value as compact JSON: `v:"a"`.
    Value(String),
    /// An item of a list by position: `i:0` (only decoded, never produced here).
    Index(usize),
}

impl Step {
    fn encode(&self) -> String {
        match self {
            Step::Field(f) => format!("f:{f}"),
            Step::Key(k) => format!("k:{k}"),
            Step::Value(v) => format!("v:{v}"),
            Step::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Option<Step> {
        let (kind, rest) = s.split_at_checked(2)?;
        Some(match kind {
            "f:" => Step::Field(rest.to_string()),
            "k:" => Step::Key(rest.to_string()),
            "v:" => Step::Value(rest.to_string()),
            "i:" => Step::Index(rest.parse().ok()?),
            _ => return None,
        })
    }

    /// How structured-merge-diff prints the step in a path.
    fn display(&self) -> String {
        match self {
            Step::Field(f) => format!(".{f}"),
            Step::Key(k) => {
                let fields: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                let parts: Vec<String> = fields.iter().map(|(n, v)| format!("{n}={v}")).collect();
                format!("[{}]", parts.join(","))
            }
            Step::Value(v) => format!("[={v}]"),
            Step::Index(i) => format!("[{i}]"),
        }
    }
}

/// A path from the object's root.
pub type Path = Vec<Step>;

/// Prints a path as conflict messages do.
pub fn path_string(path: &[Step]) -> String {
    path.iter().map(Step::display).collect()
}

/// A set of paths, as a tree: a node is a member itself (`.`) and/or the parent of members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<Step, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Whether it holds no path.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    /// Adds `path`.
    pub fn insert(&mut self, path: &[Step]) {
        match path.split_first() {
            None => self.member = true,
            Some((step, rest)) => self.children.entry(step.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` itself is a member.
    #[cfg(test)]
    pub fn contains(&self, path: &[Step]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((step, rest)) => self.children.get(step).is_some_and(|c| c.contains(rest)),
        }
    }

    /// Whether `path` or anything below it is a member.
    pub fn touches(&self, path: &[Step]) -> bool {
        match path.split_first() {
            None => !self.is_empty(),
            Some((step, rest)) => self.children.get(step).is_some_and(|c| c.touches(rest)),
        }
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (step, child) in &self.children {
            prefix.push(step.clone());
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.member |= other.member;
        for (step, child) in &other.children {
            let merged = match out.children.get(step) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(step.clone(), merged);
        }
        out
    }

    /// `self ∖ other` (members only; a path below a removed member stays if it is a member).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (step, child) in &self.children {
            let rest = match other.children.get(step) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(step.clone(), rest);
            }
        }
        out
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (step, child) in &self.children {
            if let Some(theirs) = other.children.get(step) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(step.clone(), both);
                }
            }
        }
        out
    }

    /// FieldsV1 JSON.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (step, child) in &self.children {
            map.insert(step.encode(), child.to_fields_v1());
        }
        Value::Object(map)
    }

    /// Reads FieldsV1 JSON; `None` when it is not a FieldsV1 tree.
    pub fn from_fields_v1(v: &Value) -> Option<FieldSet> {
        let map = v.as_object()?;
        let mut out = FieldSet {
            member: map.is_empty(),
            children: BTreeMap::new(),
        };
        for (k, child) in map {
            if k == "." {
                out.member = true;
                continue;
            }
            out.children
                .insert(Step::decode(k)?, FieldSet::from_fields_v1(child)?);
        }
        Some(out)
    }
}

/// Compact JSON with object keys sorted, as `k:` and `v:` steps spell values.
pub fn canonical_json(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, String> =
                m.iter().map(|(k, v)| (k, canonical_json(v))).collect();
            let parts: Vec<String> = sorted
                .iter()
                .map(|(k, v)| format!("{}:{v}", Value::String((*k).clone())))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(canonical_json).collect();
            format!("[{}]", parts.join(","))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn f(name: &str) -> Step {
        Step::Field(name.into())
    }

    #[test]
    fn fields_v1_round_trips_with_dot_for_members_that_have_children() {
        let v = json!({
            "f:metadata": {"f:labels": {".": {}, "f:role": {}}},
            "f:spec": {"f:ports": {".": {}, "k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}}}}
        });
        let set = FieldSet::from_fields_v1(&v).unwrap();
        assert!(set.contains(&[f("metadata"), f("labels")]));
        assert!(set.contains(&[f("metadata"), f("labels"), f("role")]));
        assert!(!set.contains(&[f("metadata")]));
        assert_eq!(set.to_fields_v1(), v);
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::new();
        a.insert(&[f("data"), f("a")]);
        a.insert(&[f("data"), f("b")]);
        let mut b = FieldSet::new();
        b.insert(&[f("data"), f("a")]);
        assert_eq!(a.difference(&b).paths(), vec![vec![f("data"), f("b")]]);
        assert_eq!(a.intersection(&b), b);
        assert_eq!(b.union(&a), a);
        assert!(a.difference(&a).is_empty());
        assert!(a.touches(&[f("data")]));
    }

    #[test]
    fn paths_print_as_upstream() {
        let key = Step::Key(canonical_json(&json!({"protocol": "TCP", "port": 80})));
        assert_eq!(key, Step::Key(r#"{"port":80,"protocol":"TCP"}"#.into()));
        assert_eq!(
            path_string(&[f("spec"), f("ports"), key, f("name")]),
            r#".spec.ports[port=80,protocol="TCP"].name"#
        );
        assert_eq!(
            path_string(&[f("metadata"), f("finalizers"), Step::Value("\"x\"".into())]),
            r#".metadata.finalizers[="x"]"#
        );
    }
}
