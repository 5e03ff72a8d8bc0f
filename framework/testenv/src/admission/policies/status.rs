//! The `status` of a `ValidatingAdmissionPolicy`, as upstream's status controller writes it
//! after each change of the spec (a `generation` past `status.observedGeneration`):
//! `observedGeneration`, and `typeChecking` with one warning per validation `expression` or
//! `messageExpression` that does not type-check against a kind its `matchConstraints` name
//! (at most 10 kinds, none through a wildcard), `object` and `oldObject` typed by the kind's
//! schema and `params` by the `paramKind`'s. Only custom resources have a schema here, so a
//! built-in kind is not checked, and `metadata` stays `dyn`. Done under the store lock right
//! after the policy is stored, where upstream's controller does it soon after: a watch sees
//! the policy, then its status.

use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::{Value, json};

use crate::api::cel::admission::{Declarations, Returns, compile, type_issues};
use crate::api::cel::types::{Decl, Object, Ty, schema_decl};
use crate::api::kinds::ResId;
use crate::api::validation::string_list;
use crate::storage::store::{EventType, State};

/// How many kinds upstream checks a policy against.
const MAX_TYPES: usize = 10;

/// Writes the status of a stored policy whose spec changed since its status was written.
pub fn reconcile(state: &mut State, res: ResId, stored: &Value) {
    let generation = stored
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let observed = stored
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    let Some(generation) = generation.filter(|g| *g > observed.unwrap_or(0)) else {
        return;
    };
    let spec = stored.get("spec").unwrap_or(&Value::Null);
    let warnings = warnings(state, spec);
    let mut policy = stored.clone();
    let mut status = policy
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    status.insert("observedGeneration".into(), generation.into());
    let checking = match warnings.is_empty() {
        true => json!({}),
        false => json!({"expressionWarnings": warnings}),
    };
    status.insert("typeChecking".into(), checking);
    policy["status"] = Value::Object(status);
    state.put(res, policy, EventType::Modified);
}

/// The type of a custom resource's objects (version `version`), if it has a schema.
fn object_type(state: &State, group: &str, version: &str, kind: &str) -> Option<Rc<Decl>> {
    let (_, served) = state
        .types()
        .all()
        .into_iter()
        .find(|(_, s)| s.group() == group && s.version() == version && s.kind() == kind)?;
    let decl = schema_decl(served.custom()?.schema.as_ref()?, true)?;
    let Ty::Object(object) = &decl.ty else {
        return Some(decl);
    };
    let mut fields: BTreeMap<String, Rc<Decl>> = object.fields.clone();
    fields.insert("metadata".into(), Decl::of(Ty::Dyn));
    Some(Rc::new(Decl {
        ty: Ty::Object(Rc::new(Object { fields })),
        ..(*decl).clone()
    }))
}

/// The kinds `matchConstraints` name, sorted by group, version and kind: `g/v, Kind=K` and the
/// type of their objects.
fn kinds(state: &State, spec: &Value) -> Vec<(String, Rc<Decl>)> {
    let mut found: BTreeMap<(String, String, String), Rc<Decl>> = BTreeMap::new();
    let rules = spec
        .pointer("/matchConstraints/resourceRules")
        .and_then(Value::as_array);
    for rule in rules.into_iter().flatten() {
        let list = |k: &str| string_list(rule.get(k));
        let (groups, versions) = (list("apiGroups"), list("apiVersions"));
        if groups.iter().chain(&versions).any(|g| g.contains('*')) {
            continue;
        }
        let resources: Vec<String> = list("resources")
            .into_iter()
            .filter(|r| !r.contains(['*', '/']))
            .collect();
        for g in &groups {
            for v in &versions {
                for r in &resources {
                    let Some(res) = state.types().lookup(g, v, r) else {
                        continue;
                    };
                    let Some(served) = state.served(res) else {
                        continue;
                    };
                    let kind = served.kind().to_string();
                    if let Some(decl) = object_type(state, g, v, &kind) {
                        found.insert((g.clone(), v.clone(), kind), decl);
                    }
                }
            }
        }
    }
    found
        .into_iter()
        .take(MAX_TYPES)
        .map(|((g, v, k), d)| (format!("{g}/{v}, Kind={k}"), d))
        .collect()
}

fn warnings(state: &State, spec: &Value) -> Vec<Value> {
    let kinds = kinds(state, spec);
    if kinds.is_empty() {
        return Vec::new();
    }
    let param_kind = spec.get("paramKind").filter(|p| p.is_object());
    let params_type = param_kind.and_then(|p| {
        let api_version = p.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let kind = p.get("kind").and_then(Value::as_str).unwrap_or("");
        object_type(state, group, version, kind)
    });
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let per_kind: Vec<Declarations> = kinds
        .iter()
        .map(|(_, object)| {
            let mut decls = Declarations {
                params: param_kind.is_some(),
                object: Some(object.clone()),
                params_type: params_type.clone(),
                ..Declarations::default()
            };
            let vars = spec.get("variables").and_then(Value::as_array);
            for v in vars.into_iter().flatten() {
                let ty = compile(&text(v, "expression"), Returns::Any, &decls)
                    .map_or(Ty::Dyn, |p| p.output);
                decls.variables.push((text(v, "name"), ty));
            }
            decls
        })
        .collect();
    let mut out = Vec::new();
    let validations = spec.get("validations").and_then(Value::as_array);
    for (i, v) in validations.into_iter().flatten().enumerate() {
        for field in ["expression", "messageExpression"] {
            let source = text(v, field);
            if source.is_empty() {
                continue;
            }
            let results: Vec<String> = kinds
                .iter()
                .zip(&per_kind)
                .filter_map(|((gvk, _), decls)| {
                    type_issues(&source, decls).map(|issues| format!("{gvk}: {issues}\n"))
                })
                .collect();
            if !results.is_empty() {
                out.push(json!({"fieldRef": format!("spec.validations[{i}].{field}"),
                    "warning": results.join("\n")}));
            }
        }
    }
    out
}
