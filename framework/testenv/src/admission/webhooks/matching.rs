//! Whether a webhook is called for a write, as upstream's `ShouldCallHook` decides: its
//! `namespaceSelector` (the namespace's labels; a Namespace's own on create and update; always
//! true for cluster-scoped objects), its `objectSelector` (the new or the old object's labels),
//! then its rules (operations, `apiGroups`, `apiVersions`, `resources` with subresources:
//! `services/status` does not match `services`, `*` matches main resources only, `*/*`
//! everything; `scope`), and with `matchPolicy: Equivalent` the same rules against the other
//! versions of the resource. A selector's error counts only for a webhook a rule matched.

use kube_cel::cel::Value as Cel;
use serde_json::Value;

use super::config::{Hook, Rule};
use super::equivalent::{self, Conversion};
use super::{Gvk, Gvr, Objects, Request};
use crate::api::cel::admission::{Activation, Declarations, Returns, compile_all, conditions};
use crate::api::cel::values::plain;
use crate::api::kinds::lookup;
use crate::api::status::ApiError;
use crate::storage::selectors::LabelSelector;
use crate::storage::store::State;
use crate::webhook_client::{CallError, Target};

/// A webhook called for a write: the version its rule named, how the objects get there, and
/// where the webhook is (resolved under the store lock, called without it).
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The webhook.
    pub hook: Hook,
    /// `request.kind`: the write's, or its equivalent in the version the rule named.
    pub kind: Gvk,
    /// `request.resource`.
    pub resource: Gvr,
    /// How the objects change version, when the rule named another one.
    pub conversion: Option<Conversion>,
    /// The resolved `clientConfig`.
    pub target: Result<Target, CallError>,
}

/// The webhooks of `hooks` called for `req` with `objects`, in order.
pub fn invocations(
    state: &State,
    hooks: &[Hook],
    req: &Request,
    objects: &Objects,
) -> Result<Vec<Invocation>, ApiError> {
    let mut out = Vec::new();
    for hook in hooks {
        if let Some(i) = invocation(state, hook, req, objects)? {
            out.push(i);
        }
    }
    Ok(out)
}

/// Whether `hook` is called for `req`, and how.
pub fn invocation(
    state: &State,
    hook: &Hook,
    req: &Request,
    objects: &Objects,
) -> Result<Option<Invocation>, ApiError> {
    let criteria = Criteria {
        rules: &hook.rules,
        equivalent: hook.equivalent,
        namespace_selector: &hook.namespace_selector,
        object_selector: &hook.object_selector,
    };
    let Some((kind, resource)) = matched(state, &criteria, req, objects)? else {
        return Ok(None);
    };
    match conditions_match(hook, req, &resource, objects) {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        Err(_) if hook.fail_open => return Ok(None),
        Err(e) => {
            let group = &req.resource.group;
            return Err(ApiError::forbidden(
                group,
                &req.resource.resource,
                &req.name,
                &e,
            ));
        }
    }
    let conversion = match (&req.crd, resource.version != req.resource.version) {
        (Some(crd), true) => Some(equivalent::of(state, crd)),
        _ => None,
    };
    Ok(Some(Invocation {
        hook: hook.clone(),
        kind,
        resource,
        conversion,
        target: hook.client.resolve(state),
    }))
}

/// A webhook's `matchConditions` on the write, as upstream evaluates them once its rules
/// matched: any `false` skips the webhook; an error (none `false`) is the caller's to decide
/// under `failurePolicy`. The objects are the write's version (no conversion for an
/// `Equivalent` rule), `namespaceObject` is null and `params` undeclared.
fn conditions_match(
    hook: &Hook,
    req: &Request,
    resource: &Gvr,
    objects: &Objects,
) -> Result<bool, String> {
    if hook.match_conditions.is_empty() {
        return Ok(true);
    }
    let sources: Vec<&str> = hook.match_conditions.iter().map(String::as_str).collect();
    let programs = compile_all(&sources, Returns::Bool, &Declarations::default())
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let value = |o: &Option<Value>| o.as_ref().map_or(Cel::Null, plain);
    let mut act = Activation::new(vec![
        ("object", value(&objects.object)),
        ("oldObject", value(&objects.old)),
        ("request", plain(&req.admission_request(resource))),
        ("namespaceObject", Cel::Null),
    ]);
    conditions(&programs, &mut act)
}

/// What decides whether a webhook (or a policy, or a policy binding) applies to a write.
#[derive(Debug, Clone, Copy)]
pub struct Criteria<'a> {
    /// The rules, one of which must match.
    pub rules: &'a [Rule],
    /// `matchPolicy: Equivalent`.
    pub equivalent: bool,
    /// `namespaceSelector`.
    pub namespace_selector: &'a Value,
    /// `objectSelector`.
    pub object_selector: &'a Value,
}

/// Whether `criteria` match `req`, and the kind and resource of the rule that matched (the
/// write's, or with `Equivalent` another version of it).
pub fn matched(
    state: &State,
    criteria: &Criteria<'_>,
    req: &Request,
    objects: &Objects,
) -> Result<Option<(Gvk, Gvr)>, ApiError> {
    let namespace = namespace_matches(state, criteria.namespace_selector, req, objects);
    if namespace == Ok(false) {
        return Ok(None);
    }
    let object = object_matches(criteria.object_selector, objects);
    if object == Ok(false) {
        return Ok(None);
    }
    let exact = criteria
        .rules
        .iter()
        .any(|r| matches(r, req, &req.resource));
    let (kind, resource) = if exact {
        (req.kind.clone(), req.resource.clone())
    } else if criteria.equivalent {
        let others = equivalents(state, req);
        let found = criteria
            .rules
            .iter()
            .find_map(|r| others.iter().find(|e| matches(r, req, e)));
        let Some(resource) = found else {
            return Ok(None);
        };
        let kind = match req.sub_resource.as_str() {
            "scale" => req.kind.clone(),
            _ => Gvk {
                group: resource.group.clone(),
                version: resource.version.clone(),
                kind: req.kind.kind.clone(),
            },
        };
        (kind, resource.clone())
    } else {
        return Ok(None);
    };
    namespace?;
    object?;
    Ok(Some((kind, resource)))
}

fn selector(sel: &Value) -> Result<LabelSelector, ApiError> {
    LabelSelector::from_object(sel).map_err(|e| ApiError::internal(&e))
}

fn namespace_matches(
    state: &State,
    namespace_selector: &Value,
    req: &Request,
    objects: &Objects,
) -> Result<bool, ApiError> {
    let namespaces = req.resource.resource == "namespaces";
    if req.namespace.is_empty() && !namespaces {
        return Ok(true);
    }
    let sel = selector(namespace_selector)?;
    if sel.is_empty() {
        return Ok(true);
    }
    if namespaces && req.sub_resource.is_empty() && req.operation != "DELETE" {
        return Ok(objects.object.as_ref().is_some_and(|o| sel.matches(o)));
    }
    let ns = lookup("", "v1", "namespaces").and_then(|res| state.get(res, "", &req.namespace));
    match ns {
        Some(ns) => Ok(sel.matches(ns)),
        None => Err(ApiError::not_found("", "namespaces", &req.namespace)),
    }
}

fn object_matches(object_selector: &Value, objects: &Objects) -> Result<bool, ApiError> {
    let sel = selector(object_selector)?;
    if sel.is_empty() {
        return Ok(true);
    }
    let hit = |o: &Option<Value>| o.as_ref().is_some_and(|o| sel.matches(o));
    Ok(hit(&objects.object) || hit(&objects.old))
}

fn any_or(items: &[String], requested: &str) -> bool {
    items.iter().any(|i| i == "*" || i == requested)
}

/// Upstream's `rules.Matcher` for one rule against `resource`.
fn matches(rule: &Rule, req: &Request, resource: &Gvr) -> bool {
    let namespace_kind =
        resource.group.is_empty() && resource.version == "v1" && resource.resource == "namespaces";
    let scope = match rule.scope.as_str() {
        "*" | "" => true,
        "Namespaced" => !namespace_kind && !req.namespace.is_empty(),
        "Cluster" => namespace_kind || req.namespace.is_empty(),
        _ => false,
    };
    let resource_ok = rule.resources.iter().any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r.as_str(), ""));
        (res == "*" || res == resource.resource) && (sub == "*" || sub == req.sub_resource)
    });
    scope
        && any_or(&rule.operations, req.operation)
        && any_or(&rule.groups, &resource.group)
        && any_or(&rule.versions, &resource.version)
        && resource_ok
}

/// The other served versions of a custom resource (built-in kinds have none here).
fn equivalents(state: &State, req: &Request) -> Vec<Gvr> {
    let Some(crd) = &req.crd else {
        return Vec::new();
    };
    state
        .types()
        .of_crd(crd)
        .into_iter()
        .map(|(_, c)| Gvr {
            group: c.group.clone(),
            version: c.version.clone(),
            resource: c.plural.clone(),
        })
        .filter(|g| *g != req.resource)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(op: &'static str, resource: &str, sub: &str, ns: &str) -> Request {
        Request {
            operation: op,
            kind: Gvk::default(),
            resource: Gvr {
                group: String::new(),
                version: "v1".into(),
                resource: resource.into(),
            },
            sub_resource: sub.into(),
            name: "x".into(),
            namespace: ns.into(),
            user: Default::default(),
            dry_run: false,
            options: Value::Null,
            crd: None,
            typed: true,
        }
    }

    fn rule(ops: &[&str], resources: &[&str], scope: &str) -> Rule {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
        Rule {
            operations: v(ops),
            groups: v(&[""]),
            versions: v(&["v1"]),
            resources: v(resources),
            scope: scope.into(),
        }
    }

    #[test]
    fn subresources_match_only_what_the_rule_names() {
        let status = req("UPDATE", "services", "status", "ns");
        let main = req("UPDATE", "services", "", "ns");
        let r = |res: &[&str]| rule(&["UPDATE"], res, "*");
        // wh-subresource-status-patch.txt and wh-subresource-main-not-matched.txt
        assert!(matches(&r(&["services/status"]), &status, &status.resource));
        assert!(!matches(&r(&["services/status"]), &main, &main.resource));
        assert!(matches(&r(&["*/status"]), &status, &status.resource));
        assert!(matches(&r(&["*"]), &main, &main.resource));
        assert!(!matches(&r(&["*"]), &status, &status.resource));
        assert!(matches(&r(&["*/*"]), &status, &status.resource));
        assert!(matches(&r(&["services/*"]), &status, &status.resource));
        assert!(!matches(&r(&["services"]), &status, &status.resource));
    }

    #[test]
    fn operations_and_scope() {
        let create = req("CREATE", "configmaps", "", "ns");
        assert!(matches(
            &rule(&["*"], &["configmaps"], "*"),
            &create,
            &create.resource
        ));
        assert!(!matches(
            &rule(&["UPDATE", "DELETE"], &["configmaps"], "*"),
            &create,
            &create.resource
        ));
        assert!(matches(
            &rule(&["CREATE"], &["*"], "Namespaced"),
            &create,
            &create.resource
        ));
        assert!(!matches(
            &rule(&["CREATE"], &["*"], "Cluster"),
            &create,
            &create.resource
        ));
        let namespace = req("CREATE", "namespaces", "", "");
        assert!(matches(
            &rule(&["CREATE"], &["*"], "Cluster"),
            &namespace,
            &namespace.resource
        ));
        assert!(!matches(
            &rule(&["CREATE"], &["*"], "Namespaced"),
            &namespace,
            &namespace.resource
        ));
    }
}
