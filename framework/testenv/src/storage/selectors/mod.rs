//! Label selectors (equality- and set-based) and field selectors, parsed from the query string
//! and matched against stored JSON objects the way kube-apiserver's `labels.Parse` and
//! `fields.ParseSelector` do, including the 400 for a field label the type does not support.

use serde_json::Value;

use crate::api::status::{ApiError, go_quote};
use crate::api::types::Served;
use crate::api::validation;

mod lexer;

use lexer::Tok;

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

impl LabelSelector {
    /// Parses the `labelSelector` query value as apimachinery's `labels.Parse` does; anything it
    /// refuses is a 400 with its message, so a malformed selector never selects everything.
    pub fn parse(s: &str) -> Result<LabelSelector, ApiError> {
        Parser {
            toks: lexer::lex(s),
            pos: 0,
        }
        .selector()
        .map_err(ApiError::bad_request)
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`), as apimachinery's
    /// `LabelSelectorAsSelector` reads it; an operator it does not know is its error.
    pub fn from_object(sel: &Value) -> Result<LabelSelector, String> {
        let mut reqs = Vec::new();
        if let Some(labels) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in labels {
                reqs.push(LabelReq::Eq(k.clone(), v.as_str().unwrap_or("").into()));
            }
        }
        let exprs = sel.get("matchExpressions").and_then(Value::as_array);
        for e in exprs.into_iter().flatten() {
            let key = e
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let values = || -> Vec<String> {
                let vs = e.get("values").and_then(Value::as_array);
                vs.into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            };
            reqs.push(
                match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                    "In" => LabelReq::In(key, values()),
                    "NotIn" => LabelReq::NotIn(key, values()),
                    "Exists" => LabelReq::Exists(key),
                    "DoesNotExist" => LabelReq::NotExists(key),
                    op => {
                        return Err(format!(
                            "{} is not a valid label selector operator",
                            go_quote(op)
                        ));
                    }
                },
            );
        }
        Ok(LabelSelector { reqs })
    }

    /// Whether it selects everything (`{}`).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
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

/// The operators a requirement can have after its key.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Exists,
    NotExists,
    Eq,
    NotEq,
    In,
    NotIn,
    Gt,
    Lt,
}

/// The recursive-descent parser of apimachinery's `labels` package, with its messages.
struct Parser {
    toks: Vec<(Tok, String)>,
    pos: usize,
}

impl Parser {
    /// The next token; `values` reads the `in`/`notin` keywords as identifiers, as upstream's
    /// `Values` context does.
    fn peek(&self, values: bool) -> (Tok, String) {
        let (tok, lit) = self.toks[self.pos.min(self.toks.len() - 1)].clone();
        match tok {
            Tok::In | Tok::NotIn if values => (Tok::Ident, lit),
            tok => (tok, lit),
        }
    }

    fn next(&mut self, values: bool) -> (Tok, String) {
        let t = self.peek(values);
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn selector(&mut self) -> Result<LabelSelector, String> {
        let mut reqs = Vec::new();
        loop {
            match self.peek(true) {
                (Tok::Ident | Tok::Not, _) => {
                    let req = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(req);
                    match self.next(true) {
                        (Tok::End, _) => return Ok(LabelSelector { reqs }),
                        (Tok::Comma, _) => {
                            let (t, lit) = self.peek(true);
                            if !matches!(t, Tok::Ident | Tok::Not) {
                                return Err(format!(
                                    "found '{lit}', expected: identifier after ','"
                                ));
                            }
                        }
                        (_, lit) => {
                            return Err(format!("found '{lit}', expected: ',' or 'end of string'"));
                        }
                    }
                }
                (Tok::End, _) => return Ok(LabelSelector { reqs }),
                (_, lit) => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<LabelReq, String> {
        let (key, inferred) = self.key_and_inferred_operator()?;
        let op = match inferred {
            Some(op) => op,
            None => self.operator()?,
        };
        let values = match op {
            Op::In | Op::NotIn => self.values()?,
            Op::Eq | Op::NotEq | Op::Gt | Op::Lt => self.exact_value()?,
            Op::Exists | Op::NotExists => Vec::new(),
        };
        requirement(key, op, values)
    }

    fn key_and_inferred_operator(&mut self) -> Result<(String, Option<Op>), String> {
        let (mut tok, mut lit) = self.next(true);
        let negated = tok == Tok::Not;
        if negated {
            (tok, lit) = self.next(true);
        }
        if tok != Tok::Ident {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        if let Some(e) = key_error(&lit, "<nil>") {
            return Err(e);
        }
        let ends = matches!(self.peek(true).0, Tok::End | Tok::Comma);
        let op = if negated {
            Some(Op::NotExists)
        } else if ends {
            Some(Op::Exists)
        } else {
            None
        };
        Ok((lit, op))
    }

    fn operator(&mut self) -> Result<Op, String> {
        Ok(match self.next(false) {
            (Tok::Not, _) => Op::NotExists,
            (Tok::Eq | Tok::DoubleEq, _) => Op::Eq,
            (Tok::NotEq, _) => Op::NotEq,
            (Tok::Gt, _) => Op::Gt,
            (Tok::Lt, _) => Op::Lt,
            (Tok::In, _) => Op::In,
            (Tok::NotIn, _) => Op::NotIn,
            (_, lit) => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    fn values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.next(true);
        if tok != Tok::Open {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.peek(true);
        match tok {
            Tok::Ident | Tok::Comma => {
                let set = self.identifiers()?;
                if self.next(true).0 != Tok::Close {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Tok::Close => {
                self.next(true);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn identifiers(&mut self) -> Result<Vec<String>, String> {
        let mut set = std::collections::BTreeSet::new();
        loop {
            match self.next(true) {
                (Tok::Ident, lit) => {
                    set.insert(lit);
                    match self.peek(true) {
                        (Tok::Comma, _) => {}
                        (Tok::Close, _) => return Ok(set.into_iter().collect()),
                        (_, lit) => return Err(format!("found '{lit}', expected: ',' or ')'")),
                    }
                }
                (Tok::Comma, _) => {
                    set.insert(String::new());
                    match self.peek(true).0 {
                        Tok::Close => return Ok(set.into_iter().collect()),
                        Tok::Comma => {
                            self.next(true);
                        }
                        _ => {}
                    }
                }
                (_, lit) => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        if matches!(self.peek(true).0, Tok::End | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        match self.next(true) {
            (Tok::Ident, lit) => Ok(vec![lit]),
            (_, lit) => Err(format!("found '{lit}', expected: identifier")),
        }
    }
}

/// An invalid label key as upstream's `validateLabelKey` words it (`field` is the path).
fn key_error(key: &str, field: &str) -> Option<String> {
    field_error(field, key, validation::qualified_name(field, key))
}

/// One `field.Invalid` carrying every cause's detail, joined as upstream joins them.
fn field_error(field: &str, value: &str, causes: Vec<crate::api::status::Cause>) -> Option<String> {
    if causes.is_empty() {
        return None;
    }
    let quoted = go_quote(value);
    let prefix = format!("Invalid value: {quoted}: ");
    let details: Vec<&str> = causes
        .iter()
        .map(|c| c.message.strip_prefix(&prefix).unwrap_or(&c.message))
        .collect();
    Some(format!("{field}: {prefix}{}", details.join("; ")))
}

/// Upstream's `NewRequirement` checks, aggregated as `ErrorList.ToAggregate` prints them.
fn requirement(key: String, op: Op, values: Vec<String>) -> Result<LabelReq, String> {
    let mut errs = Vec::new();
    match op {
        Op::In | Op::NotIn if values.is_empty() => errs.push(
            "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"
                .to_string(),
        ),
        Op::Gt | Op::Lt => {
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(format!(
                        "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                        go_quote(v)
                    ));
                }
            }
        }
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        let field = format!("values[{i}][{key}]");
        errs.extend(field_error(&field, v, validation::label_value(&field, v)));
    }
    match errs.len() {
        0 => {}
        1 => return Err(errs.remove(0)),
        _ => return Err(format!("[{}]", errs.join(", "))),
    }
    let one = || values.first().cloned().unwrap_or_default();
    let int = || one().parse::<i64>().unwrap_or(0);
    Ok(match op {
        Op::Exists => LabelReq::Exists(key),
        Op::NotExists => LabelReq::NotExists(key),
        Op::Eq => LabelReq::Eq(key, one()),
        Op::NotEq => LabelReq::NotEq(key, one()),
        Op::In => LabelReq::In(key, values),
        Op::NotIn => LabelReq::NotIn(key, values),
        Op::Gt => LabelReq::Gt(key, int()),
        Op::Lt => LabelReq::Lt(key, int()),
    })
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
    fn label_selector_objects_select_as_their_query_form() {
        let sel = json!({"matchLabels": {"env": "prod"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "db"]},
            {"key": "gone", "operator": "DoesNotExist"},
            {"key": "tier", "operator": "Exists"}
        ]});
        let from_object = LabelSelector::from_object(&sel).unwrap();
        assert!(from_object.matches(&obj(json!({"env": "prod", "tier": "web"}))));
        assert!(!from_object.matches(&obj(json!({"env": "prod", "tier": "cache"}))));
        assert!(LabelSelector::from_object(&json!({})).unwrap().is_empty());
        let bad = json!({"matchExpressions": [{"key": "a", "operator": "Near"}]});
        assert_eq!(
            LabelSelector::from_object(&bad).unwrap_err(),
            "\"Near\" is not a valid label selector operator"
        );
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

    /// Every selector `labels.Parse` refuses is refused with its message (never "everything").
    #[test]
    fn malformed_label_selectors_are_refused_in_upstreams_words() {
        let cases = [
            (
                "!!!",
                "unable to parse requirement: found '!', expected: identifier",
            ),
            (
                "!",
                "unable to parse requirement: found '', expected: identifier",
            ),
            (
                "!=",
                "found '!=', expected: !, identifier, or 'end of string'",
            ),
            (
                ",",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            (
                "keep!==yes",
                "unable to parse requirement: found '=', expected: identifier",
            ),
            ("a=b,", "found '', expected: identifier after ','"),
            (
                "a b",
                "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "a in b",
                "unable to parse requirement: found 'b' expected: '('",
            ),
            (
                "a>x",
                "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
            (
                "-a",
                "unable to parse requirement: <nil>: Invalid value: \"-a\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ),
        ];
        for (sel, want) in cases {
            let err = LabelSelector::parse(sel).unwrap_err();
            assert_eq!((err.code, err.message.as_str()), (400, want), "{sel}");
        }
        let o = obj(json!({"in": "x", "n": "5"}));
        for sel in [
            "in=x",
            "in in (x, y)",
            "n>4,n<6",
            "a in ()",
            "!b",
            "in notin (y)",
        ] {
            let parsed = LabelSelector::parse(sel).unwrap();
            assert_eq!(parsed.matches(&o), sel != "a in ()", "{sel}");
        }
    }

    #[test]
    fn field_selector_rejects_unknown_labels_like_upstream() {
        let nodes = &Served::Builtin(&crate::api::kinds::TABLE[0]);
        let err = FieldSelector::parse("spec.bogus=x", nodes).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(err.message, "field label not supported: spec.bogus");
        let sel = FieldSelector::parse("metadata.name=a,spec.unschedulable=false", nodes).unwrap();
        assert!(sel.matches(&obj(json!({}))));
        let sel = FieldSelector::parse("metadata.name!=a", nodes).unwrap();
        assert!(!sel.matches(&obj(json!({}))));
    }
}
