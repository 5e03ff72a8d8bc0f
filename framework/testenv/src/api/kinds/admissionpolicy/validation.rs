//! Upstream's `ValidateValidatingAdmissionPolicy` and `ValidateValidatingAdmissionPolicyBinding`,
//! causes in its order and words: every expression compiled (`api::cel::admission`) and refused
//! with `compilation failed: ...` or `must evaluate to bool`, `paramKind`, `matchConstraints`,
//! `matchConditions`, variables, validations, audit annotations; a binding's `policyName`,
//! `paramRef`, `matchResources` (upstream's path says `matchResouces`) and `validationActions`.
//! Label selectors are not checked beyond their shape.

use serde_json::Value;

use super::super::registration::{expression, match_conditions, rule};
use crate::api::cel::admission::{Declarations, Returns, compile};
use crate::api::cel::types::Ty;
use crate::api::status::{Cause, go_quote};
use crate::api::validation::{SUBDOMAIN_MSG, is_label, qualified_name, string_list};

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(|p| is_label(p, false))
}

/// A policy's causes.
pub fn policy(obj: &Value, _old: Option<&Value>) -> Vec<Cause> {
    let empty = Value::Null;
    let spec = obj.get("spec").unwrap_or(&empty);
    let mut causes = Vec::new();
    match text(spec, "failurePolicy") {
        None => causes.push(Cause::required("spec.failurePolicy", "")),
        Some(f) if !["Fail", "Ignore"].contains(&f) => causes.push(Cause::not_supported(
            "spec.failurePolicy",
            &go_quote(f),
            &["Fail", "Ignore"],
        )),
        Some(_) => {}
    }
    let params = spec.get("paramKind").is_some_and(Value::is_object);
    if let Some(kind) = spec.get("paramKind").filter(|k| k.is_object()) {
        causes.extend(param_kind(kind));
    }
    match spec.get("matchConstraints").filter(|m| m.is_object()) {
        None => causes.push(Cause::required("spec.matchConstraints", "")),
        Some(m) => {
            causes.extend(match_resources(m, "spec.matchConstraints"));
            if items(m, "resourceRules").is_empty() {
                causes.push(Cause::required("spec.matchConstraints.resourceRules", ""));
            }
        }
    }
    let base = Declarations {
        params,
        ..Declarations::default()
    };
    causes.extend(match_conditions(
        items(spec, "matchConditions"),
        &base,
        "spec.matchConditions",
    ));
    let mut decls = base.clone();
    for (i, v) in items(spec, "variables").iter().enumerate() {
        let at = format!("spec.variables[{i}]");
        let name = text(v, "name").unwrap_or("");
        if name.trim().is_empty() {
            causes.push(Cause::required(
                format!("{at}.name"),
                "name is not specified",
            ));
        } else if !is_cel_identifier(name) {
            causes.push(Cause::invalid(
                format!("{at}.name"),
                &go_quote(name),
                "name is not a valid CEL identifier",
            ));
        }
        let source = text(v, "expression").unwrap_or("");
        let ty = if source.trim().is_empty() {
            causes.push(Cause::required(
                format!("{at}.expression"),
                "expression is not specified",
            ));
            Ty::Dyn
        } else {
            match compile(source, Returns::Any, &decls) {
                Ok(p) => p.output,
                Err(e) => {
                    causes.push(Cause::invalid(
                        format!("{at}.expression"),
                        &go_quote(source),
                        &e,
                    ));
                    Ty::Dyn
                }
            }
        };
        decls.variables.push((name.to_string(), ty));
    }
    let validations = items(spec, "validations");
    let annotations = items(spec, "auditAnnotations");
    if validations.is_empty() && annotations.is_empty() {
        let why = "validations or auditAnnotations must contain at least one item";
        causes.push(Cause::required("spec.validations", why));
        causes.push(Cause::required("spec.auditAnnotations", why));
        return causes;
    }
    for (i, v) in validations.iter().enumerate() {
        causes.extend(validation(v, &decls, &format!("spec.validations[{i}]")));
    }
    if annotations.len() > 20 {
        causes.push(Cause::invalid(
            "spec.auditAnnotations",
            "[]admissionregistration.AuditAnnotation{...}",
            "must not have more than 20 auditAnnotations",
        ));
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut keys = std::collections::HashSet::new();
    for (i, a) in annotations.iter().enumerate() {
        let at = format!("spec.auditAnnotations[{i}]");
        causes.extend(audit_annotation(a, name, &decls, &at));
        let key = text(a, "key").unwrap_or("");
        if !keys.insert(key) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                message: format!("Duplicate value: {}", go_quote(key)),
                field: format!("{at}.key"),
            });
        }
    }
    causes
}

/// Upstream's `isCELIdentifier`.
fn is_cel_identifier(name: &str) -> bool {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !RESERVED.contains(&name)
}

fn param_kind(kind: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let api_version = text(kind, "apiVersion").unwrap_or("");
    if api_version.is_empty() {
        causes.push(Cause::required("spec.paramKind.apiVersion", ""));
    } else {
        let version = api_version.rsplit('/').next().unwrap_or("");
        if api_version.matches('/').count() > 1 {
            causes.push(Cause::invalid(
                "spec.paramKind.apiVersion",
                &go_quote(api_version),
                &format!("unexpected GroupVersion string: {api_version}"),
            ));
        } else if version.is_empty() {
            causes.push(Cause::invalid(
                "spec.paramKind.apiVersion",
                &go_quote(api_version),
                "version must be specified",
            ));
        }
    }
    if text(kind, "kind").is_none_or(str::is_empty) {
        causes.push(Cause::required("spec.paramKind.kind", ""));
    }
    causes
}

/// Upstream's `validateMatchResources` (defaults applied, so the policy and selectors are set).
fn match_resources(m: &Value, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    match text(m, "matchPolicy") {
        None => causes.push(Cause::required(format!("{at}.matchPolicy"), "")),
        Some(p) if !["Equivalent", "Exact"].contains(&p) => causes.push(Cause::not_supported(
            format!("{at}.matchPolicy"),
            &go_quote(p),
            &["Equivalent", "Exact"],
        )),
        Some(_) => {}
    }
    for list in ["resourceRules", "excludeResourceRules"] {
        for (i, r) in items(m, list).iter().enumerate() {
            let at = format!("{at}.{list}[{i}]");
            let mut seen = std::collections::HashSet::new();
            for (j, name) in string_list(r.get("resourceNames")).iter().enumerate() {
                if !seen.insert(name.clone()) {
                    causes.push(Cause {
                        reason: "FieldValueDuplicate",
                        message: format!("Duplicate value: {}", go_quote(name)),
                        field: format!("{at}.resourceNames[{j}]"),
                    });
                }
            }
            causes.extend(rule(r, &at));
        }
    }
    causes
}

fn validation(v: &Value, decls: &Declarations, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let source = text(v, "expression").unwrap_or("");
    if source.trim().is_empty() {
        causes.push(Cause::required(
            format!("{at}.expression"),
            "expression is not specified",
        ));
    } else {
        causes.extend(expression(
            format!("{at}.expression"),
            source,
            Returns::Bool,
            decls,
        ));
    }
    let message_expression = text(v, "messageExpression").unwrap_or("");
    if !message_expression.is_empty() && message_expression.trim().is_empty() {
        causes.push(Cause::invalid(
            format!("{at}.messageExpression"),
            &go_quote(message_expression),
            "must be non-empty if specified",
        ));
    } else if !message_expression.is_empty() {
        let field = format!("{at}.messageExpression");
        causes.extend(expression(
            field,
            message_expression,
            Returns::String,
            decls,
        ));
    }
    let message = text(v, "message").unwrap_or("");
    if !message.is_empty() && message.trim().is_empty() {
        causes.push(Cause::invalid(
            format!("{at}.message"),
            &go_quote(message),
            "message must be non-empty if specified",
        ));
    } else if message.trim().contains(['\n', '\r']) {
        causes.push(Cause::invalid(
            format!("{at}.message"),
            &go_quote(message),
            "message must not contain line breaks",
        ));
    }
    let reasons = [
        "Forbidden",
        "Invalid",
        "RequestEntityTooLarge",
        "Unauthorized",
    ];
    if let Some(r) = text(v, "reason").filter(|r| !reasons.contains(r)) {
        causes.push(Cause::not_supported(
            format!("{at}.reason"),
            &go_quote(r),
            &reasons,
        ));
    }
    causes
}

fn audit_annotation(a: &Value, policy: &str, decls: &Declarations, at: &str) -> Vec<Cause> {
    let key = text(a, "key").unwrap_or("");
    let mut causes = if policy.is_empty() {
        vec![Cause::invalid(
            format!("{at}.key"),
            &go_quote(key),
            "requires metadata.name be non-empty",
        )]
    } else {
        qualified_name(&format!("{at}.key"), &format!("{policy}/{key}"))
    };
    let source = text(a, "valueExpression").unwrap_or("").trim();
    let field = format!("{at}.valueExpression");
    if source.is_empty() {
        causes.push(Cause::required(field, "valueExpression is not specified"));
    } else if source.len() > 5 * 1024 {
        causes.push(Cause::required(
            field,
            "must not exceed 5120 bytes in length",
        ));
    } else {
        causes.extend(expression(field, source, Returns::StringOrNull, decls));
    }
    causes
}

/// A binding's causes.
pub fn binding(obj: &Value, _old: Option<&Value>) -> Vec<Cause> {
    let empty = Value::Null;
    let spec = obj.get("spec").unwrap_or(&empty);
    let mut causes = Vec::new();
    match text(spec, "policyName").unwrap_or("") {
        "" => causes.push(Cause::required("spec.policyName", "")),
        name if !is_subdomain(name) => causes.push(Cause::invalid(
            "spec.policyName",
            &go_quote(name),
            SUBDOMAIN_MSG,
        )),
        _ => {}
    }
    if let Some(r) = spec.get("paramRef").filter(|r| r.is_object()) {
        causes.extend(param_ref(r));
    }
    if let Some(m) = spec.get("matchResources").filter(|m| m.is_object()) {
        causes.extend(match_resources(m, "spec.matchResouces"));
    }
    causes.extend(validation_actions(items(spec, "validationActions")));
    causes
}

fn param_ref(r: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = text(r, "name").unwrap_or("");
    let selector = r.get("selector").is_some_and(Value::is_object);
    if !name.is_empty() {
        if name == "." || name == ".." {
            causes.push(Cause::invalid(
                "spec.paramRef.name",
                &go_quote(name),
                &format!("may not be '{name}'"),
            ));
        }
        for bad in ["/", "%"] {
            if name.contains(bad) {
                causes.push(Cause::invalid(
                    "spec.paramRef.name",
                    &go_quote(name),
                    &format!("may not contain '{bad}'"),
                ));
            }
        }
        if selector {
            causes.push(Cause::forbidden(
                "spec.paramRef.name",
                "name and selector are mutually exclusive",
            ));
        }
    }
    if selector && !name.is_empty() {
        causes.push(Cause::forbidden(
            "spec.paramRef.selector",
            "name and selector are mutually exclusive",
        ));
    }
    if name.is_empty() && !selector {
        causes.push(Cause::required(
            "spec.paramRef",
            "one of name or selector must be specified",
        ));
    }
    match text(r, "parameterNotFoundAction").unwrap_or("") {
        "" => causes.push(Cause::required("spec.paramRef.parameterNotFoundAction", "")),
        "Deny" | "Allow" => {}
        a => causes.push(Cause::not_supported(
            "spec.paramRef.parameterNotFoundAction",
            &go_quote(a),
            &["Deny", "Allow"],
        )),
    }
    causes
}

fn validation_actions(actions: &[Value]) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        let a = a.as_str().unwrap_or("");
        let at = format!("spec.validationActions[{i}]");
        if !["Audit", "Deny", "Warn"].contains(&a) {
            causes.push(Cause::not_supported(
                at.clone(),
                &go_quote(a),
                &["Audit", "Deny", "Warn"],
            ));
        }
        if seen.contains(&a) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                message: format!("Duplicate value: {}", go_quote(a)),
                field: at,
            });
        }
        seen.push(a);
    }
    if seen.contains(&"Deny") && seen.contains(&"Warn") {
        let shown: Vec<String> = seen.iter().map(|a| go_quote(a)).collect();
        causes.push(Cause::invalid(
            "spec.validationActions",
            &format!("[]admissionregistration.ValidationAction{{{}}}", shown.join(", ")),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        causes.push(Cause::required(
            "spec.validationActions",
            "at least one validation action is required",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(causes: Vec<Cause>) -> Vec<String> {
        causes
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    fn policy_with(spec: Value) -> Value {
        let mut s = json!({"failurePolicy": "Fail", "matchConstraints": {"matchPolicy": "Equivalent",
            "namespaceSelector": {}, "objectSelector": {}, "resourceRules": [{"operations": ["CREATE"],
            "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "scope": "*"}]}});
        if let (Some(s), Some(e)) = (s.as_object_mut(), spec.as_object()) {
            s.extend(e.clone());
        }
        json!({"metadata": {"name": "p.example.com"}, "spec": s})
    }

    #[test]
    fn expressions_that_do_not_compile_are_refused() {
        let bad = messages(policy(
            &policy_with(
                json!({"validations": [{"expression": "object.x +"}, {"expression": "'a'"},
                {"expression": "params.x", "messageExpression": "1"}]}),
            ),
            None,
        ));
        assert_eq!(bad.len(), 4, "{bad:?}");
        assert!(bad[0].starts_with("spec.validations[0].expression: Invalid value: \"object.x +\": compilation failed: ERROR: <input>:1:11: Syntax error"), "{}", bad[0]);
        assert_eq!(
            bad[1],
            "spec.validations[1].expression: Invalid value: \"'a'\": must evaluate to bool"
        );
        assert!(
            bad[2].contains("undeclared reference to 'params'"),
            "{}",
            bad[2]
        );
        assert_eq!(
            bad[3],
            "spec.validations[2].messageExpression: Invalid value: \"1\": must evaluate to string"
        );
        let none = messages(policy(&policy_with(json!({})), None));
        assert_eq!(
            none,
            [
                "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
                "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
            ]
        );
        let vars = policy_with(
            json!({"variables": [{"name": "n", "expression": "object.data.size()"}],
            "validations": [{"expression": "variables.n < 3"}]}),
        );
        assert!(policy(&vars, None).is_empty());
    }

    #[test]
    fn binding_causes_read_as_upstreams() {
        let b = json!({"spec": {"policyName": "", "paramRef": {"name": "a", "selector": {},
            "parameterNotFoundAction": "Maybe"}, "validationActions": ["Deny", "Warn", "Deny"]}});
        assert_eq!(
            messages(binding(&b, None)),
            [
                "spec.policyName: Required value",
                "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.parameterNotFoundAction: Unsupported value: \"Maybe\": supported values: \"Deny\", \"Allow\"",
                "spec.validationActions[2]: Duplicate value: \"Deny\"",
                "spec.validationActions: Invalid value: []admissionregistration.ValidationAction{\"Deny\", \"Warn\", \"Deny\"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ]
        );
    }
}
