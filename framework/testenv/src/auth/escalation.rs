//! RBAC's escalation prevention, as kubernetes' `pkg/registry/rbac` storage does it: a Role or
//! ClusterRole may only be written by a user who holds every permission it grants or may
//! `escalate` it, a RoleBinding or ClusterRoleBinding only by one who holds every permission of
//! the role it names or may `bind` that role; `system:masters` may do anything. A refusal is
//! upstream's 403 `... is attempting to grant RBAC permissions not currently held:` with the
//! missing rules compacted and sorted as upstream prints them.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::attributes::Attributes;
use super::rbac::{self, GROUP};
use super::tokens::UserInfo;
use crate::api::kinds::{TABLE, lookup};
use crate::api::status::{ApiError, go_quote};
use crate::api::types::Served;
use crate::patch::{self, PatchKind};
use crate::storage::store::State;

/// Refuses a create, update or patch of an RBAC role or binding that would grant `user` more
/// than it holds; any other request passes.
pub fn check(
    state: &State,
    user: &UserInfo,
    a: &Attributes,
    content_type: &str,
    body: &[u8],
) -> Result<(), ApiError> {
    let kind = match a.resource.as_str() {
        _ if !a.resource_request || a.api_group != GROUP || !a.subresource.is_empty() => {
            return Ok(());
        }
        "roles" | "clusterroles" => Kind::Role,
        "rolebindings" | "clusterrolebindings" => Kind::Binding,
        _ => return Ok(()),
    };
    if !matches!(a.verb.as_str(), "create" | "update" | "patch")
        || user.groups.iter().any(|g| g == "system:masters")
    {
        return Ok(());
    }
    let Some(obj) = written(state, a, content_type, body) else {
        // Not decodable here: the handler answers it as it answers any bad body.
        return Ok(());
    };
    let name = obj.pointer("/metadata/name").and_then(Value::as_str);
    let name = name.unwrap_or(&a.name).to_string();
    let forbidden = |why: String| ApiError::forbidden(GROUP, &a.resource, &name, &why);
    let rules = match kind {
        Kind::Role => {
            if allowed(state, user, a, "escalate", &a.resource, &name) {
                return Ok(());
            }
            rules(&obj)
        }
        Kind::Binding => {
            let role_kind = str_at(&obj, "/roleRef/kind");
            let role_name = str_at(&obj, "/roleRef/name");
            let role_resource = if role_kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            if allowed(state, user, a, "bind", role_resource, role_name) {
                return Ok(());
            }
            rbac::rules_of(state, role_kind, role_name, &a.namespace).map_err(forbidden)?
        }
    };
    confirm_no_escalation(state, user, &a.namespace, &rules).map_err(forbidden)
}

enum Kind {
    Role,
    Binding,
}

/// The object the request would store: the body, or for a patch the stored object patched.
fn written(state: &State, a: &Attributes, content_type: &str, body: &[u8]) -> Option<Value> {
    if a.verb != "patch" {
        return serde_json::from_slice(body)
            .ok()
            .or_else(|| serde_saphyr::from_slice(body).ok());
    }
    let kind = PatchKind::from_content_type(content_type)?;
    if kind == PatchKind::Apply {
        return patch::decode_apply(body).ok();
    }
    let res = lookup(GROUP, "v1", &a.resource)?;
    let old = state.get(res, &a.namespace, &a.name)?;
    patch::apply(&Served::Builtin(&TABLE[res]), kind, old, body).ok()
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn rules(obj: &Value) -> Vec<Value> {
    obj.get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Whether RBAC lets `user` `verb` (escalate, bind) the role `name` (upstream's
/// `RoleEscalationAuthorized` / `BindingAuthorized`).
fn allowed(
    state: &State,
    user: &UserInfo,
    a: &Attributes,
    verb: &str,
    resource: &str,
    name: &str,
) -> bool {
    let attrs = Attributes {
        verb: verb.into(),
        resource_request: true,
        api_group: GROUP.into(),
        api_version: "*".into(),
        namespace: a.namespace.clone(),
        resource: resource.into(),
        name: name.into(),
        ..Attributes::default()
    };
    rbac::authorize(state, user, &attrs).allowed
}

/// One permission: a group, resource, verb and maybe a resource name, or a URL and a verb.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Atom {
    group: Option<String>,
    resource: Option<String>,
    name: Option<String>,
    url: Option<String>,
    verb: String,
}

fn list<'a>(rule: &'a Value, field: &str) -> Vec<&'a str> {
    rule.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Upstream's `BreakdownRule`: a rule as the single permissions it grants, in its order.
fn breakdown(rule: &Value) -> Vec<Atom> {
    let (verbs, names) = (list(rule, "verbs"), list(rule, "resourceNames"));
    let mut out = Vec::new();
    for group in list(rule, "apiGroups") {
        for resource in list(rule, "resources") {
            for verb in &verbs {
                let atom = |name: Option<&str>| Atom {
                    group: Some(group.into()),
                    resource: Some(resource.into()),
                    name: name.map(String::from),
                    url: None,
                    verb: (*verb).into(),
                };
                if names.is_empty() {
                    out.push(atom(None));
                } else {
                    out.extend(names.iter().map(|n| atom(Some(n))));
                }
            }
        }
    }
    for url in list(rule, "nonResourceURLs") {
        out.extend(verbs.iter().map(|verb| Atom {
            group: None,
            resource: None,
            name: None,
            url: Some(url.into()),
            verb: (*verb).into(),
        }));
    }
    out
}

/// Upstream's `ruleCovers` for one requested permission.
fn covers(owner: &Value, atom: &Atom) -> bool {
    let has = |field: &str, v: &str| list(owner, field).contains(&v);
    let verb = has("verbs", "*") || has("verbs", &atom.verb);
    let group = atom
        .group
        .as_deref()
        .is_none_or(|g| has("apiGroups", "*") || has("apiGroups", g));
    let resource = atom.resource.as_deref().is_none_or(|r| {
        has("resources", "*")
            || has("resources", r)
            || r.split_once('/')
                .is_some_and(|(_, sub)| has("resources", &format!("*/{sub}")))
    });
    let owner_names = list(owner, "resourceNames");
    let name = owner_names.is_empty()
        || atom
            .name
            .as_deref()
            .is_some_and(|n| owner_names.contains(&n));
    let url = atom.url.as_deref().is_none_or(|u| {
        list(owner, "nonResourceURLs")
            .iter()
            .any(|o| *o == u || (o.ends_with('*') && u.starts_with(o.trim_end_matches('*'))))
    });
    verb && group && resource && name && url
}

/// Upstream's `ConfirmNoEscalation`: every permission of `requested` must be held by `user` in
/// `namespace` (cluster-wide ones included).
fn confirm_no_escalation(
    state: &State,
    user: &UserInfo,
    namespace: &str,
    requested: &[Value],
) -> Result<(), String> {
    let (owned, errors) = rbac::rules_for(state, user, namespace);
    let missing: Vec<Atom> = requested
        .iter()
        .flat_map(breakdown)
        .filter(|atom| !owned.iter().any(|o| covers(o, atom)))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let described: BTreeSet<String> = compact(missing).iter().map(describe).collect();
    let groups: Vec<String> = user.groups.iter().map(|g| go_quote(g)).collect();
    let mut msg = format!(
        "user {} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
        go_quote(&user.name),
        groups.join(" "),
        described.into_iter().collect::<Vec<_>>().join("\n")
    );
    if let Some(e) = errors {
        msg.push_str(&format!("; resolution errors: [{e}]"));
    }
    Err(msg)
}

/// A compacted rule: one group/resource/name (or URL) with its verbs.
struct Compact {
    atom: Atom,
    verbs: Vec<String>,
}

/// Upstream's `CompactRules`: the verbs of permissions on the same resource (and name) together.
fn compact(missing: Vec<Atom>) -> Vec<Compact> {
    let mut out: Vec<Compact> = Vec::new();
    let mut index: HashMap<Atom, usize> = HashMap::new();
    for atom in missing {
        let key = Atom {
            verb: String::new(),
            ..atom.clone()
        };
        if atom.url.is_some() {
            out.push(Compact {
                verbs: vec![atom.verb.clone()],
                atom,
            });
            continue;
        }
        match index.get(&key) {
            Some(&i) => out[i].verbs.push(atom.verb),
            None => {
                index.insert(key, out.len());
                out.push(Compact {
                    verbs: vec![atom.verb.clone()],
                    atom,
                });
            }
        }
    }
    out
}

/// Upstream's `CompactString`: `{APIGroups:["g"], Resources:["r"], Verbs:["v" "w"]}`.
fn describe(c: &Compact) -> String {
    let q = |items: &[&str]| {
        let quoted: Vec<String> = items.iter().map(|s| go_quote(s)).collect();
        format!("[{}]", quoted.join(" "))
    };
    let mut parts = Vec::new();
    if let Some(g) = &c.atom.group {
        parts.push(format!("APIGroups:{}", q(&[g])));
    }
    if let Some(r) = &c.atom.resource {
        parts.push(format!("Resources:{}", q(&[r])));
    }
    if let Some(u) = &c.atom.url {
        parts.push(format!("NonResourceURLs:{}", q(&[u])));
    }
    if let Some(n) = &c.atom.name {
        parts.push(format!("ResourceNames:{}", q(&[n])));
    }
    let verbs: Vec<&str> = c.verbs.iter().map(String::as_str).collect();
    parts.push(format!("Verbs:{}", q(&verbs)));
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_rules_are_compacted_and_described_as_upstream() {
        let rule =
            json!({"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]});
        let owner = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        let missing: Vec<Atom> = breakdown(&rule)
            .into_iter()
            .filter(|a| !covers(&owner, a))
            .collect();
        let described: Vec<String> = compact(missing).iter().map(describe).collect();
        assert_eq!(
            described,
            [
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["list"]}"#,
                r#"{APIGroups:[""], Resources:["pods/log"], Verbs:["get" "list"]}"#
            ]
        );
        let all = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        assert!(breakdown(&rule).iter().all(|a| covers(&all, a)));
        let subs = json!({"apiGroups": [""], "resources": ["*/log"], "verbs": ["get"]});
        assert!(covers(&subs, &breakdown(&rule)[2]));
    }
}
