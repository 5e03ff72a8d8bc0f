//! The shape of each `x-kubernetes-validations` entry, checked before any rule is compiled (a
//! schema with such errors has none of its rules compiled, as upstream): a rule is given, a
//! message is non-empty when set and on one line, a rule on several lines has a message, a
//! `messageExpression` is non-empty when set, `reason` is one the server knows, `fieldPath` is
//! non-empty when set and on one line.

use serde_json::Value;

use crate::api::status::{Cause, go_quote};
use crate::api::structural::Rule;

/// The reasons a rule may give (sorted, as upstream lists them).
const REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// The causes of every node of a schema, named below `base`.
pub fn causes(schema: &Value, base: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    walk(schema, base, &mut out);
    out
}

fn walk(node: &Value, at: &str, out: &mut Vec<Cause>) {
    for (i, rule) in Rule::parse_all(node).iter().enumerate() {
        entry(rule, &format!("{at}.x-kubernetes-validations[{i}]"), out);
    }
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            walk(prop, &format!("{at}.properties[{name}]"), out);
        }
    }
    if let Some(items) = node.get("items").filter(|i| i.is_object()) {
        walk(items, &format!("{at}.items"), out);
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        walk(values, &format!("{at}.additionalProperties"), out);
    }
}

fn entry(r: &Rule, at: &str, out: &mut Vec<Cause>) {
    let (rule, message) = (r.rule.trim(), r.message.trim());
    let field = |leaf: &str| format!("{at}.{leaf}");
    if rule.is_empty() {
        out.push(Cause::required(field("rule"), "rule is not specified"));
    } else if !r.message.is_empty() && message.is_empty() {
        out.push(Cause::invalid(
            field("message"),
            &go_quote(&r.message),
            "message must be non-empty if specified",
        ));
    } else if has_newlines(message) {
        out.push(Cause::invalid(
            field("message"),
            &go_quote(&r.message),
            "message must not contain line breaks",
        ));
    } else if has_newlines(rule) && message.is_empty() {
        out.push(Cause::required(
            field("message"),
            "message must be specified if rule contains line breaks",
        ));
    }
    if !r.message_expression.is_empty() && r.message_expression.trim().is_empty() {
        out.push(Cause::required(
            field("messageExpression"),
            "messageExpression must be non-empty if specified",
        ));
    }
    if let Some(reason) = r.reason.as_deref().filter(|x| !REASONS.contains(x)) {
        out.push(Cause::not_supported(
            field("reason"),
            &go_quote(reason),
            REASONS,
        ));
    }
    if !r.field_path.is_empty() && r.field_path.trim().is_empty() {
        out.push(Cause::invalid(
            field("fieldPath"),
            &go_quote(&r.field_path),
            "fieldPath must be non-empty if specified",
        ));
    }
    if has_newlines(&r.field_path) {
        out.push(Cause::invalid(
            field("fieldPath"),
            &go_quote(&r.field_path),
            "fieldPath must not contain line breaks",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn malformed_entries_are_refused_with_upstream_s_words() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [
            {"rule": " "},
            {"rule": "true", "message": " "},
            {"rule": "true", "message": "two\nlines"},
            {"rule": "true &&\ntrue"},
            {"rule": "true", "messageExpression": " ", "reason": "Nope", "fieldPath": " "}
        ]}}});
        let got: Vec<String> = causes(&schema, "s")
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let p = "s.properties[spec].x-kubernetes-validations";
        assert_eq!(
            got,
            [
                format!("{p}[0].rule: Required value: rule is not specified"),
                format!(
                    "{p}[1].message: Invalid value: \" \": message must be non-empty if specified"
                ),
                format!(
                    "{p}[2].message: Invalid value: \"two\\nlines\": message must not contain line breaks"
                ),
                format!(
                    "{p}[3].message: Required value: message must be specified if rule contains line breaks"
                ),
                format!(
                    "{p}[4].messageExpression: Required value: messageExpression must be non-empty if specified"
                ),
                format!(
                    "{p}[4].reason: Unsupported value: \"Nope\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
                ),
                format!(
                    "{p}[4].fieldPath: Invalid value: \" \": fieldPath must be non-empty if specified"
                ),
            ]
        );
    }
}
