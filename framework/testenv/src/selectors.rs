//! Label selectors (equality- and set-based) and field selectors, parsed from the query string
//! and matched against stored JSON objects the way kube-apiserver's `labels.Parse` and
//! `fields.ParseSelector` do, including the 400 for a field label the type does not support.

use serde_json::Value;

use crate::status::ApiError;
use crate::types::Served;

#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    Gt(String, i64),
    Lt(String, i64),
}

/// A parsed `labelSelector`; an empty one matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    reqs: Vec<LabelReq>,
}

fn split_top_level(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn parse_set(rest: &str, raw: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: found '{raw}', expected: '('"
            ))
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses the `labelSelector` query value.
    pub fn parse(s: &str) -> Result<LabelSelector, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let req = if let Some(key) = part.strip_prefix('!') {
                LabelReq::NotExists(key.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelReq::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some(idx) = part.find(" notin ") {
                LabelReq::NotIn(
                    part[..idx].trim().into(),
                    parse_set(&part[idx + 7..], &part)?,
                )
            } else if let Some(idx) = part.find(" in ") {
                LabelReq::In(
                    part[..idx].trim().into(),
                    parse_set(&part[idx + 4..], &part)?,
                )
            } else if let Some((k, v)) = part.split_once('>') {
                LabelReq::Gt(k.trim().into(), parse_int(v, &part)?)
            } else if let Some((k, v)) = part.split_once('<') {
                LabelReq::Lt(k.trim().into(), parse_int(v, &part)?)
            } else if part.contains(' ') || part.contains('(') {
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: {part}"
                )));
            } else {
                LabelReq::Exists(part.clone())
            };
            reqs.push(req);
        }
        Ok(LabelSelector { reqs })
    }

    /// Whether an object (its `metadata.labels`) matches.
    pub fn matches(&self, obj: &Value) -> bool {
        if self.reqs.is_empty() {
            return true;
        }
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
            LabelReq::Gt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            LabelReq::Lt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        })
    }
}

fn parse_int(v: &str, raw: &str) -> Result<i64, ApiError> {
    v.trim()
        .parse()
        .map_err(|_| ApiError::bad_request(format!("unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer: {raw}")))
}

/// A parsed `fieldSelector` bound to the type's supported field labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector {
    /// (JSON path, expected value, negated)
    reqs: Vec<(String, String, bool)>,
}

impl FieldSelector {
    /// Parses the `fieldSelector` query value; unsupported labels are a 400 as upstream.
    pub fn parse(s: &str, rt: &Served) -> Result<FieldSelector, ApiError> {
        let mut reqs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, value, neg) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            let path = match field {
                "metadata.name" => "metadata.name".to_string(),
                "metadata.namespace" if rt.namespaced() => "metadata.namespace".to_string(),
                _ => rt.field_selector(field).ok_or_else(|| {
                    ApiError::bad_request(format!("field label not supported: {field}"))
                })?,
            };
            reqs.push((path, value.trim().to_string(), neg));
        }
        Ok(FieldSelector { reqs })
    }

    /// Whether an object matches.
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(path, want, neg)| {
            let got = field_value(obj, path);
            (got == *want) != *neg
        })
    }

    /// `Some(name)` when the selector pins `metadata.name` (lets kubectl `get --watch NAME` work
    /// without scanning).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }
}

/// The string form of a field as upstream's field-label conversion renders it (missing = "").
fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => {
                return if path == "spec.unschedulable" {
                    "false".into()
                } else {
                    String::new()
                };
            }
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Label and field selector of one list or watch.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Namespace restriction (`None` = all namespaces).
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
}

impl Filter {
    /// Whether an object passes namespace, label and field selection.
    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace {
            let got = obj
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            if got != ns {
                return false;
            }
        }
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "labels": labels}, "spec": {}})
    }

    #[test]
    fn equality_and_set_based_label_selectors() {
        let o = obj(json!({"env": "prod", "tier": "web"}));
        let cases = [
            ("env=prod", true),
            ("env==prod", true),
            ("env!=prod", false),
            ("env in (prod, dev)", true),
            ("env notin (prod)", false),
            ("tier,env=prod", true),
            ("!tier", false),
            ("!missing", true),
            ("missing", false),
            ("env in (dev),tier=web", false),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn field_selector_rejects_unknown_labels_like_upstream() {
        let nodes = &Served::Builtin(&crate::resources::TABLE[0]);
        let err = FieldSelector::parse("spec.bogus=x", nodes).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(err.message, "field label not supported: spec.bogus");
        let sel = FieldSelector::parse("metadata.name=a,spec.unschedulable=false", nodes).unwrap();
        assert!(sel.matches(&obj(json!({}))));
        let sel = FieldSelector::parse("metadata.name!=a", nodes).unwrap();
        assert!(!sel.matches(&obj(json!({}))));
    }
}
