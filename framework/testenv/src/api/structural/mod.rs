//! The structural schema of a custom resource version (`openAPIV3Schema`) and what the server does
//! with it on every write, in upstream's order: prune unknown fields (unless
//! `x-kubernetes-preserve-unknown-fields`), drop non-nullable nulls, apply `default`s, then
//! validate (type, `enum`, `required`, numeric bounds, string length and `pattern`, item and
//! property counts, list-type uniqueness) into 422 causes worded as kube-openapi's validator.
//! The string `format`s the server supports are checked too, and `allOf`, `oneOf`, `anyOf` and
//! `not`. Each node also carries its CEL rules (`x-kubernetes-validations`, `rules`), which
//! `api::cel` compiles and evaluates.

use std::collections::BTreeMap;

mod composition;
mod formats;
mod rules;
mod validate;

pub use rules::Rule;

pub(crate) use validate::go_value;

use regex::Regex;
use serde_json::{Map, Value};

use crate::api::validation::string_list;

/// What kind of list a field holds (structured-merge-diff's vocabulary).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Items are scalars, each present once (`set`, or `patchStrategy:"merge"` on scalars).
    Set,
    /// Items are objects identified by these keys (`map` / `patchMergeKey`).
    Map(Vec<String>),
}

/// One node of a structural schema.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// `type` (empty for `x-kubernetes-int-or-string` / untyped preserve-unknown nodes).
    pub ty: String,
    /// `properties`.
    pub properties: BTreeMap<String, Schema>,
    /// `additionalProperties` given as a schema.
    pub additional: Option<Box<Schema>>,
    /// `items`.
    pub items: Option<Box<Schema>>,
    /// `required`.
    pub required: Vec<String>,
    /// `enum`.
    pub enum_values: Option<Vec<Value>>,
    /// `default`.
    pub default: Option<Value>,
    /// `minimum` / `maximum` and their exclusive flags.
    pub minimum: Option<f64>,
    /// `maximum`.
    pub maximum: Option<f64>,
    /// `exclusiveMinimum`.
    pub exclusive_minimum: bool,
    /// `exclusiveMaximum`.
    pub exclusive_maximum: bool,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `minLength` / `maxLength` (characters / bytes as upstream counts them).
    pub min_length: Option<u64>,
    /// `maxLength`.
    pub max_length: Option<u64>,
    /// `pattern`, compiled.
    pub pattern: Option<(String, Regex)>,
    /// `minItems` / `maxItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
    /// `minProperties` / `maxProperties`.
    pub min_properties: Option<u64>,
    /// `maxProperties`.
    pub max_properties: Option<u64>,
    /// `nullable`.
    pub nullable: bool,
    /// `x-kubernetes-preserve-unknown-fields`.
    pub preserve_unknown: bool,
    /// `x-kubernetes-embedded-resource`.
    pub embedded: bool,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// `x-kubernetes-list-type` (`atomic`, `set`, `map`).
    pub list_type: String,
    /// `x-kubernetes-list-map-keys`.
    pub map_keys: Vec<String>,
    /// `x-kubernetes-map-type` (`granular`, `atomic`; empty when unset).
    pub map_type: String,
    /// `format` (`date-time`, `duration`, `byte`, ...; empty when unset).
    pub format: String,
    /// `x-kubernetes-validations`.
    pub rules: Vec<Rule>,
    /// `allOf`.
    pub all_of: Vec<Schema>,
    /// `oneOf`.
    pub one_of: Vec<Schema>,
    /// `anyOf`.
    pub any_of: Vec<Schema>,
    /// `not`.
    pub not: Option<Box<Schema>>,
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

fn uint(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

fn branches(v: &Value, k: &str) -> Vec<Schema> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(Schema::parse).collect())
        .unwrap_or_default()
}

fn flag(v: &Value, k: &str) -> bool {
    v.get(k).and_then(Value::as_bool).unwrap_or(false)
}

impl Schema {
    /// Reads a (CRD-validated) `openAPIV3Schema`; an invalid `pattern` is ignored here because CRD
    /// validation refuses it first.
    pub fn parse(v: &Value) -> Schema {
        let strings = |k: &str| string_list(v.get(k));
        let properties = v
            .get("properties")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, s)| (k.clone(), Schema::parse(s)))
                    .collect()
            })
            .unwrap_or_default();
        let pattern = v
            .get("pattern")
            .and_then(Value::as_str)
            .and_then(|p| Regex::new(p).ok().map(|r| (p.to_string(), r)));
        Schema {
            ty: v.get("type").and_then(Value::as_str).unwrap_or("").into(),
            properties,
            additional: v
                .get("additionalProperties")
                .filter(|a| a.is_object())
                .map(|a| Box::new(Schema::parse(a))),
            items: v
                .get("items")
                .filter(|a| a.is_object())
                .map(|a| Box::new(Schema::parse(a))),
            required: strings("required"),
            enum_values: v.get("enum").and_then(Value::as_array).cloned(),
            default: v.get("default").cloned(),
            minimum: num(v, "minimum"),
            maximum: num(v, "maximum"),
            exclusive_minimum: flag(v, "exclusiveMinimum"),
            exclusive_maximum: flag(v, "exclusiveMaximum"),
            multiple_of: num(v, "multipleOf"),
            min_length: uint(v, "minLength"),
            max_length: uint(v, "maxLength"),
            pattern,
            min_items: uint(v, "minItems"),
            max_items: uint(v, "maxItems"),
            min_properties: uint(v, "minProperties"),
            max_properties: uint(v, "maxProperties"),
            nullable: flag(v, "nullable"),
            preserve_unknown: flag(v, "x-kubernetes-preserve-unknown-fields"),
            embedded: flag(v, "x-kubernetes-embedded-resource"),
            int_or_string: flag(v, "x-kubernetes-int-or-string"),
            list_type: v
                .get("x-kubernetes-list-type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            map_keys: strings("x-kubernetes-list-map-keys"),
            map_type: v
                .get("x-kubernetes-map-type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            format: v.get("format").and_then(Value::as_str).unwrap_or("").into(),
            rules: Rule::parse_all(v),
            all_of: branches(v, "allOf"),
            one_of: branches(v, "oneOf"),
            any_of: branches(v, "anyOf"),
            not: v
                .get("not")
                .filter(|n| n.is_object())
                .map(|n| Box::new(Schema::parse(n))),
        }
    }

    fn child(&self, key: &str) -> Option<&Schema> {
        self.properties.get(key).or(self.additional.as_deref())
    }

    /// The node at a dotted path (list items share their list's path).
    fn node_at(&self, path: &str) -> Option<&Schema> {
        let mut cur = self;
        for seg in path.split('.') {
            while cur.ty == "array" {
                cur = cur.items.as_deref()?;
            }
            cur = cur.child(seg)?;
        }
        Some(cur)
    }

    /// Whether the object at a dotted path is a map (`additionalProperties`) rather than a
    /// struct (`properties`), which server-side apply owns key by key with the map itself.
    pub fn is_map(&self, path: &str) -> bool {
        self.node_at(path)
            .is_some_and(|n| n.additional.is_some() && n.properties.is_empty())
    }

    /// The list type at a dotted path (items share their list's path); `None` = atomic.
    pub fn list_type(&self, path: &str) -> Option<ListType> {
        let cur = self.node_at(path)?;
        match cur.list_type.as_str() {
            "set" => Some(ListType::Set),
            "map" => Some(ListType::Map(cur.map_keys.clone())),
            _ => None,
        }
    }

    /// Drops fields the schema does not know, at the root keeping `apiVersion`, `kind` and
    /// `metadata` (ObjectMeta is pruned by the generic code).
    pub fn prune_root(&self, obj: &mut Value) {
        if let Some(m) = obj.as_object_mut() {
            self.prune_object(m, true);
        }
    }

    fn prune_object(&self, m: &mut Map<String, Value>, keep_meta: bool) {
        if !self.preserve_unknown && self.additional.is_none() {
            m.retain(|k, _| {
                self.properties.contains_key(k)
                    || (keep_meta && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
            });
        }
        for (k, v) in m.iter_mut() {
            if keep_meta && k == "metadata" {
                continue;
            }
            if let Some(s) = self.child(k) {
                s.prune(v);
            }
        }
    }

    /// Drops the fields this node does not know from a value (a `default`, say).
    pub fn prune_value(&self, v: &mut Value) {
        self.prune(v);
    }

    fn prune(&self, v: &mut Value) {
        match v {
            Value::Object(m) => self.prune_object(m, self.embedded),
            Value::Array(a) => {
                if let Some(items) = &self.items {
                    a.iter_mut().for_each(|i| items.prune(i));
                }
            }
            _ => {}
        }
    }

    /// Applies `default`s to absent fields of present objects, and drops `null`s the schema does
    /// not allow (replacing them by the default where there is one), as upstream's structural
    /// defaulting does.
    pub fn apply_defaults(&self, v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, s) in &self.properties {
                    let absent_or_null = m.get(k).is_none_or(Value::is_null);
                    if !absent_or_null {
                        continue;
                    }
                    if let Some(d) = &s.default {
                        m.insert(k.clone(), d.clone());
                    } else if m.get(k).is_some_and(Value::is_null) && !s.nullable {
                        m.remove(k);
                    }
                }
                for (k, child) in m.iter_mut() {
                    if let Some(s) = self.child(k) {
                        s.apply_defaults(child);
                    }
                }
            }
            Value::Array(a) => {
                if let Some(items) = &self.items {
                    a.iter_mut().for_each(|i| items.apply_defaults(i));
                }
            }
            _ => {}
        }
    }
}

/// The OpenAPI type name of a JSON value.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget() -> Schema {
        Schema::parse(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["color"], "properties": {
                "size": {"type": "integer", "default": 1, "minimum": 1},
                "color": {"type": "string", "enum": ["blue", "red"]},
                "name": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                          "items": {"type": "object", "properties": {"port": {"type": "integer"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}
        }}))
    }

    #[test]
    fn prunes_defaults_and_validates_like_upstream() {
        let s = widget();
        let mut obj = json!({"apiVersion": "g/v1", "kind": "W", "metadata": {"name": "w"},
            "spec": {"color": "blue", "unknown": 1, "free": {"any": {"thing": 1}}}, "extra": true});
        s.prune_root(&mut obj);
        s.apply_defaults(&mut obj);
        assert_eq!(
            obj,
            json!({"apiVersion": "g/v1", "kind": "W", "metadata": {"name": "w"},
                "spec": {"color": "blue", "size": 1, "free": {"any": {"thing": 1}}}})
        );
        assert!(s.validate_root(&obj).is_empty());
        let bad = json!({"spec": {"size": 0, "color": "green", "name": "ABCD", "ports": [{"port": 1}, {"port": 1}]}});
        let msgs: Vec<String> = s
            .validate_root(&bad)
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            msgs,
            [
                "spec.color: Unsupported value: \"green\": supported values: \"blue\", \"red\"",
                "spec.name: Too long: may not be more than 3 bytes",
                "spec.name: Invalid value: \"ABCD\": spec.name in body should match '^[a-z]+$'",
                "spec.ports[1]: Duplicate value: map[string]interface {}{\"port\":1}",
                "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
            ]
        );
        assert!(
            s.validate_root(&json!({"spec": {"color": "red", "size": 2.0}}))
                .is_empty()
        );
        let msgs: Vec<String> = s
            .validate_root(&json!({"spec": {"size": "x"}}))
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            msgs,
            [
                "spec.color: Required value",
                "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""
            ]
        );
    }

    #[test]
    fn list_types_come_from_the_schema() {
        let s = widget();
        assert_eq!(
            s.list_type("spec.ports"),
            Some(ListType::Map(vec!["port".into()]))
        );
        assert_eq!(s.list_type("spec.color"), None);
        assert_eq!(s.list_type("spec.nope.deeper"), None);
    }
}
