//! `ValidatingAdmissionPolicy` in the chain, as upstream's `policy/validating` dispatcher runs
//! it: for each stored policy (name order) whose `matchConstraints` match the write, each of its
//! bindings (name order) whose `matchResources` match; the binding's params (`params`); the
//! policy's `matchConditions`, then its variables and validations (`evaluate`). A failed
//! validation acts as the binding's `validationActions` say: `Deny` refuses the write with the
//! first such decision, `Warn` adds a `Warning` header, `Audit` (no audit log here) does nothing
//! more; an audit annotation's error denies whatever the actions (`evaluate`). An evaluation error, or a policy or binding that cannot be configured (params not
//! found with `Deny`), denies under `failurePolicy: Fail` and is ignored under `Ignore`.
//! Policies are read from the store at each write, so one applies from the write after it is
//! stored, as once upstream's informer has seen it.
//!
//! `status` writes the policy's status when it is stored.
//!
//! When an `Equivalent` rule matched another version of a custom resource than the one written,
//! the expressions see the objects (and `request.kind`, `request.resource`) in the version the
//! rule named, as upstream converts them; a CRD whose conversion is a webhook is the exception:
//! policies run under the store's lock, where no webhook is called, so they see the version
//! written.

mod evaluate;
mod params;
pub mod status;

use std::borrow::Cow;

use serde_json::{Value, json};

use super::webhooks::authorizer::{self, Server};
use super::webhooks::config::Rule;
use super::webhooks::matching::{Criteria, matched};
use super::webhooks::{Gvk, Gvr, Objects, Request, equivalent};
use crate::api::cel::authz::Authorizer;
use crate::api::kinds::lookup;
use crate::api::status::ApiError;
use crate::storage::store::State;

/// What the policies said: warnings, and the refusal if any.
#[derive(Debug, Default)]
pub struct Said {
    /// `Warn` actions' warnings, in policy order.
    pub warnings: Vec<String>,
    /// The first `Deny`.
    pub refusal: Option<ApiError>,
}

/// A refusal before it becomes the write's error.
struct Denied {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: String,
}

/// Runs every policy against `req` with `objects` (as the validating webhooks see them).
pub fn run(state: &State, req: &Request, objects: &Objects) -> Said {
    let mut said = Said::default();
    if req.exempt() {
        return said;
    }
    let (Some(policies), Some(bindings)) = (
        lookup(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicies",
        ),
        lookup(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicybindings",
        ),
    ) else {
        return said;
    };
    let mut denied = Vec::new();
    for (_, policy) in state.iter(policies, None, None) {
        let name = text(policy, "/metadata/name");
        let spec = policy.get("spec").unwrap_or(&Value::Null);
        let fail_open = text(spec, "/failurePolicy") == "Ignore";
        let config_error = |binding: Option<&str>, e: String| Denied {
            policy: name.to_string(),
            binding: binding.map(String::from),
            message: match binding {
                None => format!("failed to configure policy: {e}"),
                Some(_) => format!("failed to configure binding: {e}"),
            },
            reason: String::new(),
        };
        let constraints = spec.get("matchConstraints").unwrap_or(&Value::Null);
        let (kind, resource) = match applies(state, constraints, req, objects) {
            Ok(Some(matched)) => matched,
            Ok(None) => continue,
            Err(e) if fail_open => {
                let _ = e;
                continue;
            }
            Err(e) => {
                denied.push(config_error(None, e.message));
                continue;
            }
        };
        // Through `matchPolicy: Equivalent`, the version the rule named (see `at_once`).
        let converted = equivalent::at_once(state, req, &resource, objects);
        let seen = converted.as_ref().unwrap_or(objects);
        let compiled = match evaluate::Compiled::of_stored(policy) {
            Ok(c) => c,
            Err(_) if fail_open => continue,
            Err(e) => {
                denied.push(config_error(None, e));
                continue;
            }
        };
        for (_, binding) in state.iter(bindings, None, None) {
            if text(binding, "/spec/policyName") != name {
                continue;
            }
            let bname = text(binding, "/metadata/name");
            let bspec = binding.get("spec").unwrap_or(&Value::Null);
            match bspec.get("matchResources").filter(|m| m.is_object()) {
                None => {}
                Some(m) => match applies(state, m, req, objects) {
                    Ok(Some(_)) => {}
                    Ok(None) => continue,
                    Err(_) if fail_open => continue,
                    Err(e) => {
                        denied.push(config_error(Some(bname), e.message));
                        continue;
                    }
                },
            }
            let found = params::collect(state, spec.get("paramKind"), bspec.get("paramRef"), req);
            let found = match found {
                Ok(found) => found,
                Err(_) if fail_open => continue,
                Err(e) => {
                    denied.push(config_error(Some(bname), e));
                    continue;
                }
            };
            let request = req.admission_request(&kind, &resource);
            let server = Server::of(state, req);
            let authorizer = server.as_ref().map(|a| a as &dyn Authorizer);
            let namespace = namespace_object(state, req);
            let actions = crate::api::validation::string_list(bspec.get("validationActions"));
            for param in found {
                let input = evaluate::Input {
                    objects: seen,
                    request: &request,
                    params: param.as_deref(),
                    namespace: namespace.as_ref(),
                    authorizer: (authorizer::variable(req), authorizer),
                };
                let decisions = compiled.denials(&input, fail_open);
                for (message, reason) in decisions.failed {
                    for action in &actions {
                        match action.as_str() {
                            "Deny" => denied.push(Denied {
                                policy: name.to_string(),
                                binding: Some(bname.to_string()),
                                message: message.clone(),
                                reason: reason.clone(),
                            }),
                            "Warn" => said.warnings.push(format!(
                                "Validation failed for ValidatingAdmissionPolicy '{name}' with binding '{bname}': {message}"
                            )),
                            _ => {}
                        }
                    }
                }
                denied.extend(
                    decisions
                        .annotation_errors
                        .into_iter()
                        .map(|message| Denied {
                            policy: name.to_string(),
                            binding: Some(bname.to_string()),
                            message,
                            reason: String::new(),
                        }),
                );
            }
        }
    }
    said.refusal = denied.into_iter().next().map(|d| refusal(req, objects, d));
    said
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn rules(m: &Value, key: &str) -> Vec<(Rule, Vec<String>)> {
    let list = m.get(key).and_then(Value::as_array);
    let strings = |r: &Value, k: &str| crate::api::validation::string_list(r.get(k));
    list.into_iter()
        .flatten()
        .map(|r| {
            let scope = r.get("scope").and_then(Value::as_str).unwrap_or("*");
            let rule = Rule {
                operations: strings(r, "operations"),
                groups: strings(r, "apiGroups"),
                versions: strings(r, "apiVersions"),
                resources: strings(r, "resources"),
                scope: scope.to_string(),
            };
            (rule, strings(r, "resourceNames"))
        })
        .collect()
}

/// Upstream's policy matcher on a `matchConstraints` or `matchResources`: its selectors, not
/// an `excludeResourceRules` rule, and one of its `resourceRules` (any write when it has none);
/// a rule with `resourceNames` matches only those names. The kind and resource the rule named.
fn applies(
    state: &State,
    m: &Value,
    req: &Request,
    objects: &Objects,
) -> Result<Option<(Gvk, Gvr)>, ApiError> {
    let empty = json!({});
    let named = |rules: Vec<(Rule, Vec<String>)>| -> Vec<Rule> {
        rules
            .into_iter()
            .filter(|(_, names)| names.is_empty() || names.contains(&req.name))
            .map(|(r, _)| r)
            .collect()
    };
    let equivalent = m.get("matchPolicy").and_then(Value::as_str) != Some("Exact");
    let selectors = Criteria {
        rules: &[],
        equivalent,
        namespace_selector: m.get("namespaceSelector").unwrap_or(&empty),
        object_selector: m.get("objectSelector").unwrap_or(&empty),
    };
    let none = Criteria {
        namespace_selector: &empty,
        object_selector: &empty,
        ..selectors
    };
    let excluded = named(rules(m, "excludeResourceRules"));
    if !excluded.is_empty()
        && matched(
            state,
            &Criteria {
                rules: &excluded,
                ..none
            },
            req,
            objects,
        )?
        .is_some()
    {
        return Ok(None);
    }
    let included = rules(m, "resourceRules");
    if included.is_empty() {
        let any = [Rule {
            operations: vec!["*".into()],
            groups: vec!["*".into()],
            versions: vec!["*".into()],
            resources: vec!["*/*".into()],
            scope: "*".into(),
        }];
        let all = Criteria {
            rules: &any,
            ..selectors
        };
        return matched(state, &all, req, objects);
    }
    let included = named(included);
    let some = Criteria {
        rules: &included,
        ..selectors
    };
    matched(state, &some, req, objects)
}

/// The `namespaceObject` variable: the write's namespace (none for a Namespace itself or a
/// cluster-scoped object).
fn namespace_object(state: &State, req: &Request) -> Option<Value> {
    if req.namespace.is_empty() || req.resource.resource == "namespaces" {
        return None;
    }
    let res = lookup("", "v1", "namespaces")?;
    state
        .get(res, "", &req.namespace)
        .map(|ns| ns.as_ref().clone())
}

/// Upstream's refusal: `admission.NewForbidden` with the policy's reason and its code
/// (`Invalid`, 422, unless the validation names another), the message also as a cause.
fn refusal(req: &Request, objects: &Objects, d: Denied) -> ApiError {
    let message = match &d.binding {
        Some(b) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
            d.policy, d.message
        ),
        None => format!(
            "ValidatingAdmissionPolicy '{}' denied request: {}",
            d.policy, d.message
        ),
    };
    let name = objects
        .object
        .as_ref()
        .or(objects.old.as_ref())
        .and_then(|o| o.pointer("/metadata/name"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or(&req.name);
    let mut e = ApiError::forbidden(&req.resource.group, &req.resource.resource, name, &message);
    let reason = match d.reason.as_str() {
        "" => "Invalid".to_string(),
        r => r.to_string(),
    };
    e.code = match reason.as_str() {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    };
    e.reason = Cow::Owned(reason);
    if let Some(details) = e.details.as_mut().and_then(Value::as_object_mut) {
        details.insert("causes".into(), json!([{"message": message}]));
    }
    e
}
