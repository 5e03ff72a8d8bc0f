//! The RBAC authorizer over the stored Roles, ClusterRoles and their bindings, evaluated as
//! kubernetes' `plugin/pkg/auth/authorizer/rbac` does: ClusterRoleBindings first, then the
//! RoleBindings of the request's namespace, the first rule that allows wins, and the reason
//! names the binding (`RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to User "u"`).
//! Members of `system:masters` are always allowed, as upstream's privileged-group authorizer
//! does ahead of RBAC.

use serde_json::Value;

use super::attributes::Attributes;
use super::tokens::UserInfo;
use crate::api::kinds::lookup;
use crate::storage::store::State;

pub(super) const GROUP: &str = "rbac.authorization.k8s.io";

/// An authorizer's answer: allowed or not (RBAC never denies outright), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether some rule allows the request.
    pub allowed: bool,
    /// Upstream's reason: the allowing binding, or the lookup errors met on the way.
    pub reason: String,
}

/// Decides `a` for `user` on the RBAC objects in `state`.
pub fn authorize(state: &State, user: &UserInfo, a: &Attributes) -> Decision {
    if user.groups.iter().any(|g| g == "system:masters") {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let mut allowed_by = None;
    let errors = visit_rules(state, user, &a.namespace, &mut |source, rule| {
        if rule_allows(a, rule) {
            allowed_by = Some(source());
            return false;
        }
        true
    });
    if let Some(source) = allowed_by {
        return Decision {
            allowed: true,
            reason: format!("RBAC: allowed by {source}"),
        };
    }
    Decision {
        allowed: false,
        reason: aggregate_errors(&errors).map_or(String::new(), |e| format!("RBAC: {e}")),
    }
}

/// Every rule RBAC grants `user` in `namespace` (cluster-wide ones included), in upstream's
/// order, and the role lookup errors met, aggregated (upstream's `RulesFor`).
pub fn rules_for(state: &State, user: &UserInfo, namespace: &str) -> (Vec<Value>, Option<String>) {
    let mut rules = Vec::new();
    let errors = visit_rules(state, user, namespace, &mut |_, rule| {
        rules.push(rule.clone());
        true
    });
    (rules, aggregate_errors(&errors))
}

/// `utilerrors.NewAggregate(errs).Error()`: one error as is, several in brackets.
fn aggregate_errors(errors: &[String]) -> Option<String> {
    match errors {
        [] => None,
        [one] => Some(one.clone()),
        many => Some(format!("[{}]", many.join(", "))),
    }
}

/// Visits every rule bound to `user`: the ClusterRoleBindings', then (for a namespace) the
/// namespace's RoleBindings', with a description of the binding that grants it; `visit`
/// returns false to stop. Returns the role lookup errors met on the way.
fn visit_rules(
    state: &State,
    user: &UserInfo,
    namespace: &str,
    visit: &mut dyn FnMut(&dyn Fn() -> String, &Value) -> bool,
) -> Vec<String> {
    let mut errors: Vec<String> = Vec::new();
    let mut passes = Vec::new();
    if let Some(res) = lookup(GROUP, "v1", "clusterrolebindings") {
        passes.push((res, None));
    }
    if let Some(res) = lookup(GROUP, "v1", "rolebindings")
        && !namespace.is_empty()
    {
        passes.push((res, Some(namespace)));
    }
    for (res, ns) in passes {
        for (_, binding) in state.iter(res, ns, None) {
            let binding_ns = ns.unwrap_or("");
            let Some(subject) = applies_to(user, binding, binding_ns) else {
                continue;
            };
            let role_kind = str_at(binding, "/roleRef/kind");
            let role_name = str_at(binding, "/roleRef/name");
            let rules = match rules_of(state, role_kind, role_name, binding_ns) {
                Ok(rules) => rules,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let source = || {
                let binding_name = str_at(binding, "/metadata/name");
                match ns {
                    Some(_) => format!(
                        "RoleBinding {} of {role_kind} {} to {}",
                        q(&format!("{binding_name}/{binding_ns}")),
                        q(role_name),
                        describe_subject(subject, binding_ns)
                    ),
                    None => format!(
                        "ClusterRoleBinding {} of {role_kind} {} to {}",
                        q(binding_name),
                        q(role_name),
                        describe_subject(subject, "")
                    ),
                }
            };
            for rule in &rules {
                if !visit(&source, rule) {
                    return errors;
                }
            }
        }
    }
    errors
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn q(s: &str) -> String {
    crate::api::status::go_quote(s)
}

/// The first subject of `binding` that `user` is (upstream's `appliesTo`).
fn applies_to<'a>(user: &UserInfo, binding: &'a Value, namespace: &str) -> Option<&'a Value> {
    let subjects = binding.get("subjects").and_then(Value::as_array)?;
    subjects.iter().find(|s| {
        let name = str_at(s, "/name");
        match str_at(s, "/kind") {
            "User" => user.name == name,
            "Group" => user.groups.iter().any(|g| g == name),
            "ServiceAccount" => {
                let sa_ns = match str_at(s, "/namespace") {
                    "" => namespace,
                    ns => ns,
                };
                !sa_ns.is_empty() && user.name == format!("system:serviceaccount:{sa_ns}:{name}")
            }
            _ => false,
        }
    })
}

/// `Kind "name"`, a ServiceAccount as `"name/namespace"` (upstream's `describeSubject`).
fn describe_subject(s: &Value, binding_ns: &str) -> String {
    let kind = str_at(s, "/kind");
    let name = str_at(s, "/name");
    if kind == "ServiceAccount" {
        let ns = match str_at(s, "/namespace") {
            "" => binding_ns,
            ns => ns,
        };
        return format!("{kind} {}", q(&format!("{name}/{ns}")));
    }
    format!("{kind} {}", q(name))
}

/// The rules a role reference grants, or upstream's lookup error.
pub(super) fn rules_of(
    state: &State,
    kind: &str,
    name: &str,
    namespace: &str,
) -> Result<Vec<Value>, String> {
    let (res, ns, singular) = match kind {
        "Role" => (lookup(GROUP, "v1", "roles"), namespace, "role"),
        "ClusterRole" => (lookup(GROUP, "v1", "clusterroles"), "", "clusterrole"),
        other => return Err(format!("unsupported role reference kind: {}", q(other))),
    };
    let role = res
        .and_then(|res| state.get(res, ns, name))
        .ok_or_else(|| format!("{singular}.{GROUP} {} not found", q(name)))?;
    Ok(role
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

fn strings<'a>(rule: &'a Value, field: &str) -> impl Iterator<Item = &'a str> {
    rule.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// Upstream's `RuleAllows`.
pub fn rule_allows(a: &Attributes, rule: &Value) -> bool {
    let verb = strings(rule, "verbs").any(|v| v == "*" || v == a.verb);
    if !verb {
        return false;
    }
    if !a.resource_request {
        return strings(rule, "nonResourceURLs").any(|u| {
            u == "*"
                || u == a.path
                || (u.ends_with('*') && a.path.starts_with(u.trim_end_matches('*')))
        });
    }
    let combined = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let group = strings(rule, "apiGroups").any(|g| g == "*" || g == a.api_group);
    let resource = strings(rule, "resources").any(|r| {
        r == "*"
            || r == combined
            || (!a.subresource.is_empty()
                && r.len() == a.subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(a.subresource.as_str()))
    });
    let mut names = strings(rule, "resourceNames").peekable();
    let name = names.peek().is_none() || names.any(|n| n == a.name);
    group && resource && name
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn res(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            ..Attributes::default()
        }
    }

    #[test]
    fn rules_match_as_upstream() {
        let rule = json!({"apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": ["get", "patch"]});
        assert!(rule_allows(&res("get", "", "nodes", "", "n"), &rule));
        assert!(rule_allows(
            &res("patch", "", "nodes", "status", "n"),
            &rule
        ));
        assert!(!rule_allows(&res("list", "", "nodes", "", ""), &rule));
        assert!(!rule_allows(&res("get", "apps", "nodes", "", ""), &rule));
        assert!(!rule_allows(&res("get", "", "nodes", "proxy", "n"), &rule));
        let subs = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]});
        assert!(rule_allows(
            &res("update", "x", "services", "status", "s"),
            &subs
        ));
        assert!(!rule_allows(
            &res("update", "x", "services", "", "s"),
            &subs
        ));
        let named = json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["get"]});
        assert!(rule_allows(&res("get", "", "configmaps", "", "a"), &named));
        assert!(!rule_allows(&res("get", "", "configmaps", "", "b"), &named));
        assert!(!rule_allows(&res("get", "", "configmaps", "", ""), &named));
        let urls = json!({"nonResourceURLs": ["/metrics", "/api/*"], "verbs": ["get"]});
        let path = |p: &str| Attributes {
            verb: "get".into(),
            path: p.into(),
            ..Attributes::default()
        };
        assert!(rule_allows(&path("/metrics"), &urls));
        assert!(rule_allows(&path("/api/v1"), &urls));
        assert!(!rule_allows(&path("/metrics/slis"), &urls));
        assert!(!rule_allows(&res("get", "", "metrics", "", ""), &urls));
    }
}
