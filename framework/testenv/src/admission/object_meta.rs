//! The object-meta steps every write takes, whatever its kind: on create the type meta, the
//! fields only the server sets (uid, resourceVersion, timestamps, generation), generateName and
//! the namespace from the URL; on update the resourceVersion precondition, the metadata that
//! cannot change, no new finalizers on a terminating object, the status-subresource split and
//! the generation; and the `metadata.name` rule of the kind.

use serde_json::{Map, Value};

use crate::api::kind::NameRule;
use crate::api::meta::meta_mut;
use crate::api::status::{ApiError, Cause, go_quote};
use crate::api::types::Served;
use crate::api::validation::{DNS1035_MSG, LABEL_MSG, SUBDOMAIN_MSG, is_label, string_list};

/// Which endpoint an update came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// The object itself: status changes are ignored for types with a status subresource.
    Main,
    /// `/status`: only status and metadata changes are kept.
    Status,
}

/// A create's object meta, `ns` the namespace from the URL: the object and its name (generated
/// from `generateName` if it had none).
pub(super) fn create(
    rt: &Served,
    ns: Option<&str>,
    mut obj: Value,
) -> Result<(Value, String), ApiError> {
    require_object(&obj)?;
    obj["kind"] = rt.kind().into();
    obj["apiVersion"] = rt.api_version().into();
    let meta = meta_mut(&mut obj);
    crate::crd::prune_object_meta(meta);
    for k in [
        "uid",
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
        "generation",
    ] {
        meta.remove(k);
    }
    let mut name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if name.is_empty()
        && let Some(prefix) = meta
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
    {
        name = format!("{prefix}{}", crate::api::meta::random_suffix());
        meta.insert("name".into(), name.clone().into());
    }
    if rt.keeps_generation() {
        meta.insert("generation".into(), 1.into());
    }
    if rt.namespaced() {
        let url_ns = ns.unwrap_or("");
        match meta.get("namespace").and_then(Value::as_str) {
            Some(body_ns) if !body_ns.is_empty() && body_ns != url_ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), url_ns.into());
            }
        }
    } else {
        meta.remove("namespace");
    }
    meta.insert("uid".into(), uuid::Uuid::new_v4().to_string().into());
    meta.insert("creationTimestamp".into(), crate::api::meta::now().into());
    if name.is_empty() {
        return Err(ApiError::invalid(
            rt.group(),
            rt.kind(),
            "",
            vec![Cause::required(
                "metadata.name",
                "name or generateName is required",
            )],
        ));
    }
    Ok((obj, name))
}

/// An update's object meta: `new` as far as the object-meta rules and the endpoint let it
/// change `old`.
pub(super) fn update(
    rt: &Served,
    old: &Value,
    mut new: Value,
    endpoint: Endpoint,
) -> Result<Value, ApiError> {
    require_object(&new)?;
    let name = str_at(old, "/metadata/name").to_string();
    let new_rv = str_at(&new, "/metadata/resourceVersion");
    if !new_rv.is_empty() && new_rv != str_at(old, "/metadata/resourceVersion") {
        return Err(ApiError::stale(rt.group(), rt.plural(), &name));
    }
    new["kind"] = rt.kind().into();
    new["apiVersion"] = rt.api_version().into();
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let meta = meta_mut(&mut new);
    meta.remove("managedFields");
    crate::crd::prune_object_meta(meta);
    for k in [
        "generation",
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generateName",
        "resourceVersion",
    ] {
        match old_meta.get(k) {
            Some(v) => meta.insert(k.into(), v.clone()),
            None => meta.remove(k),
        };
    }
    if old_meta.contains_key("deletionTimestamp") {
        let old_f = string_list(old_meta.get("finalizers"));
        let added: Vec<String> = string_list(meta.get("finalizers"))
            .into_iter()
            .filter(|f| !old_f.contains(f))
            .collect();
        if !added.is_empty() {
            let list: Vec<String> = added.iter().map(|f| go_quote(f)).collect();
            return Err(ApiError::invalid(
                rt.group(),
                rt.kind(),
                &name,
                vec![Cause::forbidden(
                    "metadata.finalizers",
                    &format!(
                        "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        list.join(", ")
                    ),
                )],
            ));
        }
    }
    if rt.status_subresource() && rt.custom().is_some() && endpoint == Endpoint::Status {
        // A custom resource's /status takes nothing but `status` (not even metadata).
        let status = new.get("status").cloned();
        new = old.clone();
        match status {
            Some(st) => new["status"] = st,
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    } else if rt.status_subresource() {
        let obj = new
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("not an object"))?;
        let old_obj = old.as_object().cloned().unwrap_or_default();
        match endpoint {
            Endpoint::Main => restore(obj, &old_obj, "status"),
            Endpoint::Status => {
                let keep: Vec<String> = old_obj
                    .keys()
                    .chain(obj.keys())
                    .filter(|k| {
                        !matches!(k.as_str(), "status" | "metadata" | "kind" | "apiVersion")
                    })
                    .cloned()
                    .collect();
                for k in keep {
                    restore(obj, &old_obj, &k);
                }
            }
        }
    }
    Ok(new)
}

/// The `metadata.name` causes of the kind's name rule.
pub(super) fn name_causes(rule: NameRule, name: &str) -> Vec<Cause> {
    let quoted = go_quote(name);
    let field = "metadata.name";
    match rule {
        NameRule::Subdomain => {
            let mut c = Vec::new();
            if name.len() > 253 {
                c.push(Cause::invalid(
                    field,
                    &quoted,
                    "must be no more than 253 characters",
                ));
            }
            if !name.split('.').all(|p| is_label(p, false)) {
                c.push(Cause::invalid(field, &quoted, SUBDOMAIN_MSG));
            }
            c
        }
        NameRule::Label if !is_label(name, false) => {
            vec![Cause::invalid(field, &quoted, LABEL_MSG)]
        }
        NameRule::Dns1035 if !is_label(name, true) => {
            vec![Cause::invalid(field, &quoted, DNS1035_MSG)]
        }
        NameRule::PathSegment
            if name == "." || name == ".." || name.contains('/') || name.contains('%') =>
        {
            vec![Cause::invalid(
                field,
                &quoted,
                "may not contain '/' or '%' or be '.' or '..'",
            )]
        }
        _ => Vec::new(),
    }
}

fn str_at<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// Refuses a body that is not a JSON object, in the API server's words.
fn require_object(body: &Value) -> Result<(), ApiError> {
    if body.is_object() {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "the body of the request was in an unknown format",
        ))
    }
}

/// `metadata.generation` + 1 when anything outside `metadata` (and `status`, for types whose
/// status is a subresource) changed; the status endpoint never changes the rest, so it never
/// bumps.
pub(super) fn bump_generation(rt: &Served, old: &Value, new: &mut Value) {
    let skip_status = rt.status_subresource();
    let rest = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| {
                        let meta = matches!(k.as_str(), "metadata" | "apiVersion" | "kind");
                        !(meta || (skip_status && k.as_str() == "status"))
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let old_gen = old
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let generation = if rest(old) != rest(new) {
        old_gen + 1
    } else {
        old_gen
    };
    if generation > 0 {
        meta_mut(new).insert("generation".into(), generation.into());
    }
}

fn restore(obj: &mut Map<String, Value>, old: &Map<String, Value>, key: &str) {
    match old.get(key) {
        Some(v) => obj.insert(key.into(), v.clone()),
        None => obj.remove(key),
    };
}
