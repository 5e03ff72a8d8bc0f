//! Validation of a custom resource against its structural schema, into 422 causes worded as
//! kube-openapi's validator words them (as apiextensions-apiserver converts them to field errors).

use serde_json::{Map, Value};

use super::{Schema, json_type};
use crate::api::status::{Cause, go_quote};

impl Schema {
    /// Validates the object under the root schema (metadata, apiVersion and kind are the generic
    /// code's business).
    pub fn validate_root(&self, obj: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let Some(m) = obj.as_object() {
            let rest: Map<String, Value> = m
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut root = self.clone();
            root.required
                .retain(|r| !matches!(r.as_str(), "apiVersion" | "kind" | "metadata"));
            root.validate(&Value::Object(rest), "", &mut causes);
        }
        causes
    }

    /// Validates a value against this node (a `default`, say), paths relative to it (`""` is
    /// the node itself).
    pub fn validate_value(&self, v: &Value) -> Vec<Cause> {
        let mut out = Vec::new();
        self.validate(v, "", &mut out);
        out
    }

    pub(super) fn validate(&self, v: &Value, path: &str, out: &mut Vec<Cause>) {
        // kube-openapi names the root "" (so its messages start with " in body").
        let shown = path;
        if v.is_null() {
            if !self.nullable && !self.ty.is_empty() {
                out.push(type_invalid(path, "null", &self.ty, shown));
            }
            return;
        }
        let actual = json_type(v);
        let type_ok = match self.ty.as_str() {
            "" => !self.int_or_string || matches!(actual, "string" | "integer"),
            "number" => matches!(actual, "number" | "integer"),
            // A whole float (`1.0`) is an integer to kube-openapi, as it is in JSON.
            "integer" => actual == "integer" || v.as_f64().is_some_and(|f| f.fract() == 0.0),
            t => t == actual,
        };
        let has_format = !self.ty.is_empty() && super::formats::is_supported(&self.format);
        if !type_ok && has_format && matches!(v, Value::Array(_)) && !self.is_numeric() {
            // kube-openapi skips the type check of a list under a string format.
        } else if !type_ok && has_format && !matches!(v, Value::String(_) | Value::Array(_)) {
            // kube-openapi names the format, and the Go format of the value, instead of types.
            let go_format = match actual {
                "integer" => "int64",
                "number" => "float64",
                _ => "",
            };
            out.push(type_invalid(path, go_format, &self.format, shown));
            return;
        } else if !type_ok {
            let want = if self.int_or_string {
                "integer,string"
            } else {
                &self.ty
            };
            out.push(type_invalid(path, actual, want, shown));
            return;
        }
        self.validate_composition(v, path, out);
        match v {
            Value::String(s) => self.validate_string(s, path, shown, out),
            Value::Number(_) => self.validate_number(v, path, shown, out),
            _ => {}
        }
        if let Some(allowed) = &self.enum_values
            && !allowed.contains(v)
        {
            let list: Vec<String> = allowed
                .iter()
                .map(|a| {
                    a.as_str()
                        .map(String::from)
                        .unwrap_or_else(|| a.to_string())
                })
                .collect();
            let list: Vec<&str> = list.iter().map(String::as_str).collect();
            out.push(Cause::not_supported(path, &go_value(v), &list));
        }
        match v {
            Value::Object(m) => self.validate_object(m, path, shown, out),
            Value::Array(a) => self.validate_array(a, path, shown, out),
            _ => {}
        }
    }

    fn validate_string(&self, s: &str, path: &str, shown: &str, out: &mut Vec<Cause>) {
        let len = s.chars().count() as u64;
        if let Some(min) = self.min_length
            && len < min
        {
            let d = format!("{shown} in body should be at least {min} chars long");
            out.push(Cause::invalid(path, &go_quote(s), &d));
        }
        if let Some(max) = self.max_length
            && len > max
        {
            let unit = if max == 1 { "byte" } else { "bytes" };
            out.push(Cause {
                reason: "FieldValueTooLong",
                message: format!("Too long: may not be more than {max} {unit}"),
                field: path.into(),
            });
        }
        if let Some((p, re)) = &self.pattern
            && !re.is_match(s)
        {
            let d = format!("{shown} in body should match '{p}'");
            out.push(Cause::invalid(path, &go_quote(s), &d));
        }
        if super::formats::check(&self.format, s) == Some(false) {
            // kube-openapi reports a bad format as a type error, the format as the type.
            out.push(type_invalid(path, s, &self.format, shown));
        }
    }

    fn validate_number(&self, v: &Value, path: &str, shown: &str, out: &mut Vec<Cause>) {
        let Some(x) = v.as_f64() else { return };
        let value = go_value(v);
        let bound = |b: f64| fmt_num(b);
        if let Some(min) = self.minimum {
            let (bad, rel) = if self.exclusive_minimum {
                (x <= min, "greater than")
            } else {
                (x < min, "greater than or equal to")
            };
            if bad {
                let d = format!("{shown} in body should be {rel} {}", bound(min));
                out.push(Cause::invalid(path, &value, &d));
            }
        }
        if let Some(max) = self.maximum {
            let (bad, rel) = if self.exclusive_maximum {
                (x >= max, "less than")
            } else {
                (x > max, "less than or equal to")
            };
            if bad {
                let d = format!("{shown} in body should be {rel} {}", bound(max));
                out.push(Cause::invalid(path, &value, &d));
            }
        }
        if let Some(m) = self.multiple_of
            && m != 0.0
            && (x / m).fract() != 0.0
        {
            let d = format!("{shown} in body should be a multiple of {}", bound(m));
            out.push(Cause::invalid(path, &value, &d));
        }
    }

    fn validate_object(
        &self,
        m: &Map<String, Value>,
        path: &str,
        shown: &str,
        out: &mut Vec<Cause>,
    ) {
        let n = m.len() as u64;
        if let Some(min) = self.min_properties
            && n < min
        {
            let d = format!("{shown} in body should have at least {min} properties");
            out.push(Cause::invalid(path, &n.to_string(), &d));
        }
        if let Some(max) = self.max_properties
            && n > max
        {
            out.push(too_many(path, n, max));
        }
        for r in &self.required {
            if !m.contains_key(r) {
                out.push(Cause::required(join(path, r), ""));
            }
        }
        let mut keys: Vec<&String> = m.keys().collect();
        keys.sort();
        for k in keys {
            if let Some(s) = self.child(k) {
                let child =
                    if self.embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                        continue;
                    } else {
                        join(path, k)
                    };
                s.validate(&m[k], &child, out);
            }
        }
    }

    fn validate_array(&self, a: &[Value], path: &str, shown: &str, out: &mut Vec<Cause>) {
        let n = a.len() as u64;
        if let Some(min) = self.min_items
            && n < min
        {
            let d = format!("{shown} in body should have at least {min} items");
            out.push(Cause::invalid(path, &n.to_string(), &d));
        }
        if let Some(max) = self.max_items
            && n > max
        {
            out.push(too_many(path, n, max));
        }
        if let Some(items) = &self.items {
            for (i, item) in a.iter().enumerate() {
                items.validate(item, &format!("{path}[{i}]"), out);
            }
        }
        self.validate_list_type(a, path, out);
    }

    fn validate_list_type(&self, a: &[Value], path: &str, out: &mut Vec<Cause>) {
        let key_of = |v: &Value| -> Value {
            match self.list_type.as_str() {
                "map" => Value::Array(
                    self.map_keys
                        .iter()
                        .map(|k| v.get(k).cloned().unwrap_or(Value::Null))
                        .collect(),
                ),
                _ => v.clone(),
            }
        };
        if !matches!(self.list_type.as_str(), "set" | "map") {
            return;
        }
        for (i, item) in a.iter().enumerate() {
            let k = key_of(item);
            if a[..i].iter().any(|prev| key_of(prev) == k) {
                let shown = if self.list_type == "map" {
                    map_key_display(&self.map_keys, item)
                } else {
                    go_value(item)
                };
                out.push(Cause {
                    reason: "FieldValueDuplicate",
                    message: format!("Duplicate value: {shown}"),
                    field: format!("{path}[{i}]"),
                });
            }
        }
    }
}

impl Schema {
    fn is_numeric(&self) -> bool {
        matches!(self.ty.as_str(), "integer" | "number")
    }
}

fn map_key_display(keys: &[String], item: &Value) -> String {
    let parts: Vec<String> = keys
        .iter()
        .map(|k| {
            let v = item.get(k).cloned().unwrap_or(Value::Null);
            format!("\"{k}\":{v}")
        })
        .collect();
    format!("map[string]interface {{}}{{{}}}", parts.join(", "))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn too_many(path: &str, n: u64, max: u64) -> Cause {
    Cause {
        reason: "FieldValueTooMany",
        message: format!("Too many: {n}: must have at most {max} items"),
        field: path.into(),
    }
}

fn type_invalid(path: &str, actual: &str, want: &str, shown: &str) -> Cause {
    let q = go_quote(actual);
    Cause {
        reason: "FieldValueTypeInvalid",
        message: format!("Invalid value: {q}: {shown} in body must be of type {want}: {q}"),
        field: path.into(),
    }
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// A value as Go's `%#v` prints it in a field error.
pub(crate) fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(go_value).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", go_quote(k), go_value(&m[*k])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", items.join(", "))
        }
        other => other.to_string(),
    }
}
