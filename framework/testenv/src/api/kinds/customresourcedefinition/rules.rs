//! A CRD's CEL rules checked when it is written, as apiextensions-apiserver checks them: every
//! rule compiles against its node's type and returns a bool, every `messageExpression` returns
//! a string, every `fieldPath` names a field, and no transition rule sits below a list whose
//! items cannot be matched with their old values. Versions that share one schema are reported
//! once, under `spec.validation` (the internal form the server validates).

use serde_json::Value;

use crate::api::cel::compile::{Refused, RuleError, compile_root};
use crate::api::cel::cost::{CRD_LIMIT, RULE_LIMIT, over_budget};
use crate::api::status::{Cause, go_quote};
use crate::api::structural::{Rule, Schema};

/// The causes of the CRD's rules, after its other schema causes.
pub fn causes(crd: &Value) -> Vec<Cause> {
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let schemas: Vec<Option<&Value>> = versions
        .iter()
        .map(|v| v.pointer("/schema/openAPIV3Schema"))
        .collect();
    let shared =
        schemas.len() > 1 && schemas.windows(2).all(|w| w[0] == w[1]) || schemas.len() == 1;
    let mut out = Vec::new();
    for (i, schema) in schemas.iter().enumerate() {
        let Some(schema) = schema else { continue };
        let base = if shared {
            "spec.validation.openAPIV3Schema".to_string()
        } else {
            format!("spec.versions[{i}].schema.openAPIV3Schema")
        };
        // Malformed entries are the schema's errors; then no rule is compiled.
        let malformed = super::rule_shape::causes(schema, &base);
        if malformed.is_empty() {
            let compiled = compile_root(&Schema::parse(schema));
            out.extend(compiled.refused.iter().map(|r| cause(&base, r)));
            out.extend(total_causes(&base, compiled.costs));
        } else {
            out.extend(malformed);
        }
        if shared {
            break;
        }
    }
    out
}

/// How many of the most expensive rules a refusal for the total names.
const MOST_EXPENSIVE: usize = 4;

/// When the rules together cost more than the per-CRD budget: the most expensive of them, then
/// the schema.
fn total_causes(base: &str, mut costs: Vec<(String, u64)>) -> Vec<Cause> {
    let total = costs.iter().fold(0u64, |t, (_, c)| t.saturating_add(*c));
    if total <= CRD_LIMIT {
        return Vec::new();
    }
    costs.sort_by_key(|c| std::cmp::Reverse(c.1));
    let mut out: Vec<Cause> = costs
        .iter()
        .take(MOST_EXPENSIVE)
        .map(|(at, _)| {
            let mut parts = at.split('|');
            let (node, index, leaf) = (parts.next(), parts.next(), parts.next());
            let field = format!(
                "{}.x-kubernetes-validations[{}].{}",
                node_path(base, node.unwrap_or_default()),
                index.unwrap_or_default(),
                leaf.unwrap_or_default()
            );
            Cause::forbidden(
                field,
                "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            )
        })
        .collect();
    out.push(Cause::forbidden(
        base,
        &over_budget(
            "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
            total,
            CRD_LIMIT,
        ),
    ));
    out
}

fn node_path(base: &str, node: &str) -> String {
    if node.is_empty() {
        base.to_string()
    } else {
        format!("{base}.{node}")
    }
}

fn cause(base: &str, r: &Refused) -> Cause {
    let node = node_path(base, &r.node);
    let at = |leaf: &str| format!("{node}.x-kubernetes-validations[{}].{leaf}", r.index);
    match &r.error {
        RuleError::Cost(cost) => Cause::forbidden(
            at("rule"),
            &over_budget("estimated rule cost", *cost, RULE_LIMIT),
        ),
        RuleError::MessageCost(cost) => Cause::forbidden(
            at("messageExpression"),
            &over_budget("estimated messageExpression cost", *cost, RULE_LIMIT),
        ),
        RuleError::Rule(detail) => Cause::invalid(at("rule"), &go_rule(&r.rule), detail),
        RuleError::MessageExpression(detail) => {
            Cause::invalid(at("messageExpression"), &go_rule(&r.rule), detail)
        }
        RuleError::FieldPath(detail) => Cause::invalid(
            at("fieldPath"),
            &go_quote(&r.rule.field_path),
            &format!("fieldPath must be a valid path: {detail}"),
        ),
        RuleError::Uncorrelatable(list) => {
            let list = node_path(base, list);
            Cause::invalid(
                at("rule"),
                &go_quote(&r.rule.rule),
                &format!(
                    "oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"
                ),
            )
        }
    }
}

/// A rule as Go's `%#v` prints upstream's internal `apiextensions.ValidationRule` (a set pointer
/// prints as an address, which differs on every run).
fn go_rule(r: &Rule) -> String {
    let pointer = |ty: &str, set: bool| {
        if set {
            format!("(*{ty})(0xc000000000)")
        } else {
            format!("(*{ty})(nil)")
        }
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
        go_quote(&r.rule),
        go_quote(&r.message),
        go_quote(&r.message_expression),
        pointer("apiextensions.FieldValueErrorReason", r.reason.is_some()),
        go_quote(&r.field_path),
        pointer("bool", r.optional_old_self.is_some()),
    )
}
