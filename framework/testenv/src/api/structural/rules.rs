//! One `x-kubernetes-validations` entry of a schema node, as written: the CEL `rule`, what its
//! failure says (`message`, `messageExpression`), how it is reported (`reason`, `fieldPath`) and
//! whether it runs without an old value (`optionalOldSelf`). Compiling and evaluating it is
//! `api::cel`'s business.

use serde_json::Value;

/// A validation rule of a schema node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rule {
    /// The CEL expression; `self` is the node's value.
    pub rule: String,
    /// The message when the rule is false (`failed rule: <rule>` when empty).
    pub message: String,
    /// A CEL expression that makes the message.
    pub message_expression: String,
    /// `FieldValueInvalid` (the default), `FieldValueForbidden`, `FieldValueRequired` or
    /// `FieldValueDuplicate`.
    pub reason: Option<String>,
    /// A JSON path below the node that the error names instead of the node.
    pub field_path: String,
    /// Whether a transition rule also runs on create, with `oldSelf` an empty optional.
    pub optional_old_self: Option<bool>,
}

impl Rule {
    /// The rules of a schema node (`x-kubernetes-validations`); entries that are not objects
    /// are skipped (CRD validation refuses them first).
    pub fn parse_all(node: &Value) -> Vec<Rule> {
        let Some(list) = node
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        else {
            return Vec::new();
        };
        list.iter()
            .filter(|r| r.is_object())
            .map(Rule::parse)
            .collect()
    }

    /// One entry.
    pub fn parse(v: &Value) -> Rule {
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Rule {
            rule: text("rule"),
            message: text("message"),
            message_expression: text("messageExpression"),
            reason: v.get("reason").and_then(Value::as_str).map(String::from),
            field_path: text("fieldPath"),
            optional_old_self: v.get("optionalOldSelf").and_then(Value::as_bool),
        }
    }

    /// What errors about the rule call it: its message if it has one, else its text
    /// (upstream's `ruleErrorString`).
    pub fn error_string(&self) -> &str {
        let m = self.message.trim();
        if m.is_empty() { self.rule.trim() } else { m }
    }

    /// The detail of a failed rule without a message expression: its message, or
    /// `failed rule: <rule>`.
    pub fn message_or_default(&self) -> String {
        let m = self.message.trim();
        if m.is_empty() {
            format!("failed rule: {}", self.rule.trim())
        } else {
            m.to_string()
        }
    }
}
