//! Validation the admissionregistration kinds share (webhook configurations and admission
//! policies): upstream's `validateRuleWithOperations` and `validateMatchConditions`.

use serde_json::Value;

use crate::api::cel::admission::{Declarations, Returns, compile};
use crate::api::status::{Cause, go_quote};
use crate::api::validation::qualified_name;

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// A compiled expression's cause, if it does not compile.
pub fn expression(
    field: String,
    source: &str,
    returns: Returns,
    decls: &Declarations,
) -> Option<Cause> {
    compile(source, returns, decls)
        .err()
        .map(|e| Cause::invalid(field, &go_quote(source), &e))
}

/// Upstream's `validateRuleWithOperations`.
pub fn rule(r: &Value, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for key in ["operations", "apiGroups", "apiVersions", "resources"] {
        if crate::api::validation::string_list(r.get(key)).is_empty() {
            causes.push(Cause::required(format!("{at}.{key}"), ""));
        }
    }
    let ops = ["*", "CREATE", "UPDATE", "DELETE", "CONNECT"];
    for (k, op) in crate::api::validation::string_list(r.get("operations"))
        .iter()
        .enumerate()
    {
        if !ops.contains(&op.as_str()) {
            causes.push(Cause::not_supported(
                format!("{at}.operations[{k}]"),
                &go_quote(op),
                &ops,
            ));
        }
    }
    if let Some(scope) = text(r, "scope").filter(|s| !["Cluster", "Namespaced", "*"].contains(s)) {
        causes.push(Cause::not_supported(
            format!("{at}.scope"),
            &go_quote(scope),
            &["Cluster", "Namespaced", "*"],
        ));
    }
    causes
}

/// Upstream's `validateMatchConditions`: at most 64, each named (a qualified name) and unique,
/// each expression a bool that compiles.
pub fn match_conditions(conditions: &[Value], decls: &Declarations, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if conditions.len() > 64 {
        causes.push(Cause {
            reason: "FieldValueTooMany",
            message: format!("Too many: {}: must have at most 64 items", conditions.len()),
            field: at.to_string(),
        });
    }
    let mut names = std::collections::HashSet::new();
    for (i, c) in conditions.iter().enumerate() {
        let at = format!("{at}[{i}]");
        let source = text(c, "expression").unwrap_or("").trim();
        if source.is_empty() {
            causes.push(Cause::required(format!("{at}.expression"), ""));
        } else {
            causes.extend(expression(
                format!("{at}.expression"),
                source,
                Returns::Bool,
                decls,
            ));
        }
        let name = text(c, "name").unwrap_or("");
        if name.is_empty() {
            causes.push(Cause::required(format!("{at}.name"), ""));
        } else {
            causes.extend(qualified_name(&format!("{at}.name"), name));
            if !names.insert(name) {
                causes.push(Cause {
                    reason: "FieldValueDuplicate",
                    message: format!("Duplicate value: {}", go_quote(name)),
                    field: format!("{at}.name"),
                });
            }
        }
    }
    causes
}
