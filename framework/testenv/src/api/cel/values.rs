//! An object's JSON as CEL sees it under its schema: property names escaped (a name CEL cannot
//! spell is left out), map keys as written, `number`s as doubles, `date-time` / `date` strings
//! as timestamps, `duration` strings as durations and `byte` strings as bytes; at the root of
//! a resource `apiVersion`, `kind` and `metadata.name` / `generateName` are there whatever the
//! schema says. Without a schema (policies, webhooks) JSON maps one to one.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use kube_cel::cel::Value as Cel;
use kube_cel::cel::objects::{Key, Map};
use serde_json::Value;

use super::types::escape;
use crate::api::structural::Schema;

/// `v` under `schema` (`None`: as plain JSON); `resource_root` as in [`super::types::schema_decl`].
pub fn to_cel(v: &Value, schema: Option<&Schema>, resource_root: bool) -> Cel {
    let Some(s) = schema else {
        return plain(v);
    };
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) if s.ty == "number" => Cel::Float(n.as_f64().unwrap_or(0.0)),
        Value::Number(_) => plain(v),
        Value::String(text) => string(text, &s.format),
        Value::Array(items) => Cel::List(Arc::new(
            items
                .iter()
                .map(|i| match s.items.as_deref() {
                    Some(is) => to_cel(i, Some(is), is.embedded),
                    None => plain(i),
                })
                .collect(),
        )),
        Value::Object(m) => object(m, s, resource_root),
    }
}

fn object(m: &serde_json::Map<String, Value>, s: &Schema, resource_root: bool) -> Cel {
    let mut out: HashMap<Key, Cel> = HashMap::with_capacity(m.len());
    if let Some(values) = s.additional.as_deref() {
        for (k, v) in m {
            out.insert(
                Key::from(k.as_str()),
                to_cel(v, Some(values), values.embedded),
            );
        }
    } else if s.properties.is_empty() && !resource_root {
        return plain_object(m);
    } else {
        for (k, prop) in &s.properties {
            if let (Some(v), Some(name)) = (m.get(k), escape(k)) {
                out.insert(Key::from(name), to_cel(v, Some(prop), prop.embedded));
            }
        }
    }
    if resource_root {
        for k in ["apiVersion", "kind"] {
            if let Some(v) = m.get(k) {
                out.insert(Key::from(k), plain(v));
            }
        }
        if let Some(Value::Object(meta)) = m.get("metadata") {
            let mut fields = HashMap::new();
            for k in ["name", "generateName"] {
                if let Some(v) = meta.get(k) {
                    fields.insert(Key::from(k), plain(v));
                }
            }
            out.insert(Key::from("metadata"), Cel::Map(Map::from(fields)));
        }
    }
    Cel::Map(Map::from(out))
}

fn string(text: &str, format: &str) -> Cel {
    let parsed = match format {
        "date-time" => text.parse::<jiff::Timestamp>().ok().and_then(timestamp),
        "date" => text
            .parse::<jiff::civil::Date>()
            .ok()
            .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok())
            .and_then(|z| timestamp(z.timestamp())),
        "duration" => go_duration(text).map(Cel::Duration),
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()
            .map(|b| Cel::Bytes(Arc::new(b))),
        _ => None,
    };
    parsed.unwrap_or_else(|| Cel::String(Arc::new(text.to_string())))
}

fn timestamp(t: jiff::Timestamp) -> Option<Cel> {
    let utc = chrono::DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond() as u32)?;
    Some(Cel::Timestamp(utc.fixed_offset()))
}

/// A Go duration (`1h30m`, `-1.5s`, `300ms`, `0`).
pub fn go_duration(text: &str) -> Option<chrono::Duration> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        nanos += number * scale;
        rest = &rest[unit_end..];
    }
    if nanos > i64::MAX as f64 {
        return None;
    }
    let d = chrono::Duration::nanoseconds(nanos as i64);
    Some(if negative { -d } else { d })
}

/// JSON as CEL without a schema.
pub fn plain(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(plain).collect())),
        Value::Object(m) => plain_object(m),
    }
}

fn plain_object(m: &serde_json::Map<String, Value>) -> Cel {
    let out: HashMap<Key, Cel> = m
        .iter()
        .map(|(k, v)| (Key::from(k.as_str()), plain(v)))
        .collect();
    Cel::Map(Map::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_take_the_schema_shape() {
        let s = Schema::parse(&json!({"type": "object", "properties": {
            "x-y": {"type": "string"},
            "ratio": {"type": "number"},
            "at": {"type": "string", "format": "date-time"},
            "for": {"type": "string", "format": "duration"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}
        }}));
        let v = to_cel(
            &json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n", "uid": "u"},
                "x-y": "a", "ratio": 1, "at": "2024-01-02T03:04:05Z", "for": "1h30m",
                "labels": {"a.b/c": "d"}, "unknown": 1}),
            Some(&s),
            true,
        );
        let Cel::Map(m) = v else { panic!() };
        assert_eq!(
            m.get(&Key::from("x__dash__y")),
            Some(&Cel::String(Arc::new("a".into())))
        );
        assert_eq!(m.get(&Key::from("ratio")), Some(&Cel::Float(1.0)));
        assert!(matches!(m.get(&Key::from("at")), Some(Cel::Timestamp(_))));
        assert_eq!(
            m.get(&Key::from("__for__")),
            Some(&Cel::Duration(chrono::Duration::minutes(90)))
        );
        assert!(m.get(&Key::from("unknown")).is_none());
        let Some(Cel::Map(labels)) = m.get(&Key::from("labels")) else {
            panic!()
        };
        assert!(labels.get(&Key::from("a.b/c")).is_some());
        let Some(Cel::Map(meta)) = m.get(&Key::from("metadata")) else {
            panic!()
        };
        assert!(meta.get(&Key::from("uid")).is_none());
    }

    #[test]
    fn go_durations() {
        assert_eq!(
            go_duration("1.5s"),
            Some(chrono::Duration::milliseconds(1500))
        );
        assert_eq!(go_duration("-2m"), Some(chrono::Duration::minutes(-2)));
        assert_eq!(go_duration("1d"), None);
        assert_eq!(go_duration(""), None);
    }
}
