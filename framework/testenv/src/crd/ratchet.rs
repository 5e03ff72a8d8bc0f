//! Validation ratcheting for a custom resource's schema errors, as 1.30+ servers do it: on an
//! update, an error about a value the update leaves as it was does not block the write. "As it
//! was" is judged on the deepest node of the error's path that can be matched with the old
//! object (object fields and map keys by name, items of `map` lists by their keys; other list
//! items only through their list), so a missing required field counts as unchanged only when
//! its parent is.

use serde_json::Value;

use crate::api::status::Cause;
use crate::api::structural::Schema;

/// One step of a field path.
enum Step<'a> {
    Field(&'a str),
    Index(&'a str),
}

fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').unwrap_or(r.len());
            out.push(Step::Index(&r[..end]));
            rest = r.get(end + 1..).unwrap_or("");
        } else {
            let r = rest.strip_prefix('.').unwrap_or(rest);
            let end = r.find(['.', '[']).unwrap_or(r.len());
            out.push(Step::Field(&r[..end]));
            rest = &r[end..];
        }
    }
    out
}

/// Whether the value a cause is about is unchanged from `old`.
pub fn unchanged(schema: &Schema, new: &Value, old: &Value, field: &str) -> bool {
    let (mut s, mut n, mut o) = (Some(schema), new, old);
    for step in steps(field) {
        let next = match (step, n, o) {
            (Step::Field(k) | Step::Index(k), Value::Object(nm), Value::Object(om)) => {
                let child = s.and_then(|s| s.properties.get(k).or(s.additional.as_deref()));
                match (nm.get(k), om.get(k)) {
                    (Some(nv), Some(ov)) => Some((child, nv, ov)),
                    _ => None,
                }
            }
            (Step::Index(i), Value::Array(na), Value::Array(oa)) => {
                let list = s;
                let item = list.and_then(|l| l.items.as_deref());
                let keys = list
                    .filter(|l| l.list_type == "map" && !l.map_keys.is_empty())
                    .map(|l| &l.map_keys);
                match (keys, i.parse::<usize>().ok().and_then(|i| na.get(i))) {
                    (Some(keys), Some(nv)) => oa
                        .iter()
                        .find(|ov| keys.iter().all(|k| ov.get(k) == nv.get(k)))
                        .map(|ov| (item, nv, ov)),
                    _ => None,
                }
            }
            _ => None,
        };
        match next {
            Some((child, nv, ov)) => (s, n, o) = (child, nv, ov),
            None => break,
        }
    }
    n == o
}

/// The schema causes of an update without those about unchanged values.
pub fn keep_changed(schema: &Schema, new: &Value, old: &Value, causes: Vec<Cause>) -> Vec<Cause> {
    causes
        .into_iter()
        .filter(|c| !unchanged(schema, new, old, subject(c)))
        .collect()
}

/// The path of the value a cause is about: its field, or for a combinator's fieldless cause
/// (`<nil>: Invalid value: "": "spec.x" must validate ...`) the path its message quotes.
fn subject(c: &Cause) -> &str {
    if c.field != "<nil>" {
        return &c.field;
    }
    c.message
        .strip_prefix("Invalid value: \"\": \"")
        .and_then(|rest| rest.split_once('"'))
        .map_or(&c.field, |(path, _)| path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unchanged_values_are_judged_where_they_correlate() {
        let s = Schema::parse(
            &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "name": {"type": "string"},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
                "tags": {"type": "array", "items": {"type": "string"}}
            }}}}),
        );
        let old =
            json!({"spec": {"name": "BAD", "ports": [{"name": "a", "port": 0}], "tags": ["x"]}});
        let new = json!({"spec": {"name": "BAD", "ports": [{"name": "b", "port": 1}, {"name": "a", "port": 0}], "tags": ["x", "y"]}});
        assert!(unchanged(&s, &new, &old, "spec.name"));
        assert!(unchanged(&s, &new, &old, "spec.ports[1].port"));
        assert!(!unchanged(&s, &new, &old, "spec.ports[0].port"));
        assert!(!unchanged(&s, &new, &old, "spec.tags[0]"));
        assert!(!unchanged(&s, &new, &old, "spec.missing"));
        assert!(unchanged(
            &s,
            &json!({"spec": {"a": 1}}),
            &json!({"spec": {"a": 1}}),
            "spec.missing"
        ));
    }
}
