//! What the server does to an object on its own before storing it: object-meta rules (names,
//! generateName, uid, timestamps, immutable fields, finalizers on terminating objects), the
//! status-subresource split, and per-type defaulting and validation (Node not-ready taint,
//! Service clusterIP / nodePort allocation and immutability, Namespace defaults).

pub mod defaults;
pub mod service;
pub mod write_checks;

use serde_json::{Map, Value, json};

use crate::api::resources::{NameRule, ResId, Strategy, lookup};
use crate::api::status::{ApiError, Cause, go_quote};
use crate::api::types::Served;
use crate::api::validation::{DNS1035_MSG, LABEL_MSG, SUBDOMAIN_MSG, is_label, string_list};
use crate::storage::store::State;

pub use crate::storage::allocations::AdmissionConfig;

fn name_causes(rule: NameRule, name: &str) -> Vec<Cause> {
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

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
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

/// Fills in and checks everything a create needs; `ns` is the namespace from the URL.
pub fn prepare_create(
    rt: &Served,
    res: ResId,
    ns: Option<&str>,
    mut obj: Value,
    state: &State,
    cfg: &AdmissionConfig,
) -> Result<Value, ApiError> {
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
    match rt.strategy() {
        Strategy::Crd => crate::crd::admit::prepare_create(&mut obj),
        Strategy::CustomResource => crate::crd::admit::prepare_create_custom(rt, &mut obj),
        _ => {}
    }
    crate::admission::defaults::apply(rt, &mut obj);
    crate::admission::defaults::admit_create(rt, &mut obj);
    let mut causes = name_causes(rt.name_rule(), &name);
    causes.extend(type_causes(rt, &obj, None));
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            invalid_group(rt),
            rt.kind(),
            &name,
            causes,
        ));
    }
    if let Some(ns) = ns.filter(|_| rt.namespaced()) {
        check_namespace_open(state, ns)?;
    }
    let ns_key = if rt.namespaced() {
        ns.unwrap_or("")
    } else {
        ""
    };
    if state.get(res, ns_key, &name).is_some() {
        return Err(ApiError::already_exists(rt.group(), rt.plural(), &name));
    }
    match (rt.strategy(), rt) {
        (Strategy::Node, _) => default_node(&mut obj),
        (Strategy::Namespace, _) => default_namespace(&mut obj, &name),
        (Strategy::Service, Served::Builtin(b)) => {
            crate::admission::service::admit(b, &mut obj, None, state, cfg)?
        }
        _ => {}
    }
    Ok(obj)
}

/// Object-meta validation for every type plus the type's own field rules (`old` on update).
fn type_causes(rt: &Served, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = crate::api::validation::object_meta(obj);
    match rt.strategy() {
        Strategy::Node => causes.extend(crate::api::validation::taints(obj)),
        Strategy::Crd => causes.extend(crate::crd::validation::validate(obj, old)),
        Strategy::CustomResource => causes.extend(crate::crd::admit::validate(rt, obj)),
        _ => {}
    }
    if rt.group() == "coordination.k8s.io" && rt.kind() == "Lease" {
        causes.extend(crate::api::validation::lease(obj));
    }
    causes.extend(crate::admission::defaults::causes(rt, obj));
    if rt.kind() == "Event" && matches!(rt.group(), "" | "events.k8s.io") {
        causes.extend(crate::api::validation::event(rt.group(), obj));
    }
    causes
}

/// The group a 422 names: events.k8s.io Events are validated as the core type they convert to
/// (defaults-event-events-v1-wrong-namespace.txt: `Event "x" is invalid`).
fn invalid_group(rt: &Served) -> &str {
    match (rt.group(), rt.kind()) {
        ("events.k8s.io", "Event") => "",
        (g, _) => g,
    }
}

/// NamespaceLifecycle: 404 for a missing namespace, 403 for a terminating one.
pub fn check_namespace_open(state: &State, ns: &str) -> Result<(), ApiError> {
    let Some(nsid) = lookup("", "v1", "namespaces") else {
        return Ok(());
    };
    match state.get(nsid, "", ns) {
        None => Err(ApiError::not_found("", "namespaces", ns)),
        Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => Err(ApiError {
            code: 403,
            reason: "Forbidden".into(),
            message: format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
            details: Some(
                json!({"causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}]}),
            ),
            retry_after: None,
        }),
        Some(_) => Ok(()),
    }
}

/// Which endpoint an update came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// The object itself: status changes are ignored for types with a status subresource.
    Main,
    /// `/status`: only status and metadata changes are kept.
    Status,
}

/// Fills in and checks an update of `old` to `new` (PUT, or the result of a patch).
pub fn prepare_update(
    rt: &Served,
    old: &Value,
    mut new: Value,
    endpoint: Endpoint,
    state: &State,
    cfg: &AdmissionConfig,
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
    match rt.strategy() {
        Strategy::Crd => crate::crd::admit::prepare_update(&mut new),
        Strategy::CustomResource => crate::crd::admit::apply_schema(rt, &mut new),
        _ => {}
    }
    if rt.keeps_generation() {
        bump_generation(rt, old, &mut new);
    }
    crate::admission::defaults::apply(rt, &mut new);
    let causes = type_causes(rt, &new, Some(old));
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            invalid_group(rt),
            rt.kind(),
            &name,
            causes,
        ));
    }
    match (rt.strategy(), rt) {
        (Strategy::Service, Served::Builtin(b)) => {
            crate::admission::service::admit(b, &mut new, Some(old), state, cfg)?
        }
        (Strategy::Node, _) => {
            zero_condition_times(&mut new);
            sync_pod_cidrs(&mut new);
            validate_node_update(rt, old, &new)?;
        }
        _ => {}
    }
    Ok(new)
}

/// `metadata.generation` + 1 when anything outside `metadata` (and `status`, for types whose
/// status is a subresource) changed; the status endpoint never changes the rest, so it never
/// bumps.
fn bump_generation(rt: &Served, old: &Value, new: &mut Value) {
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

/// NodeCondition's times are Go structs, so upstream serializes unset ones as `null` rather than
/// omitting them (see node-status-patch-condition.txt); do the same.
fn zero_condition_times(obj: &mut Value) {
    if let Some(conds) = obj
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in conds.iter_mut().filter_map(Value::as_object_mut) {
            for k in ["lastHeartbeatTime", "lastTransitionTime"] {
                c.entry(k).or_insert(Value::Null);
            }
        }
    }
}

/// `spec.podCIDR` and `spec.podCIDRs` are one field upstream (v1 <-> internal conversion): a lone
/// podCIDR becomes `podCIDRs: [it]`, and podCIDR always mirrors `podCIDRs[0]`.
fn sync_pod_cidrs(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let single = spec
        .get("podCIDR")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let list = string_list(spec.get("podCIDRs"));
    if list.is_empty() && !single.is_empty() {
        spec.insert("podCIDRs".into(), json!([single]));
    } else if let Some(first) = list.first() {
        spec.insert("podCIDR".into(), first.clone().into());
    }
}

/// Upstream `ValidateNodeUpdate`: providerID and podCIDRs may only go from unset to set.
fn validate_node_update(rt: &Served, old: &Value, new: &Value) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    let old_cidrs = string_list(old.pointer("/spec/podCIDRs"));
    if !old_cidrs.is_empty() && old_cidrs != string_list(new.pointer("/spec/podCIDRs")) {
        causes.push(Cause::forbidden(
            "spec.podCIDRs",
            "node updates may not change podCIDR except from \"\" to valid",
        ));
    }
    let old_id = str_at(old, "/spec/providerID");
    if !old_id.is_empty() && old_id != str_at(new, "/spec/providerID") {
        causes.push(Cause::forbidden(
            "spec.providerID",
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        rt.group(),
        rt.kind(),
        str_at(old, "/metadata/name"),
        causes,
    ))
}

fn default_node(obj: &mut Value) {
    zero_condition_times(obj);
    sync_pod_cidrs(obj);
    const NOT_READY: &str = "node.kubernetes.io/not-ready";
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    let spec = &mut obj["spec"];
    if !spec.get("taints").is_some_and(Value::is_array) {
        spec["taints"] = json!([]);
    }
    if let Some(taints) = spec["taints"].as_array_mut()
        && !taints
            .iter()
            .any(|t| t["key"] == NOT_READY && t["effect"] == "NoSchedule")
    {
        taints.push(json!({"key": NOT_READY, "effect": "NoSchedule"}));
    }
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let status = &mut obj["status"];
    if status.get("daemonEndpoints").is_none() {
        status["daemonEndpoints"] = json!({"kubeletEndpoint": {"Port": 0}});
    }
    if status.get("nodeInfo").is_none() {
        status["nodeInfo"] = json!({
            "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "",
            "containerRuntimeVersion": "", "kubeletVersion": "", "kubeProxyVersion": "",
            "operatingSystem": "", "architecture": ""
        });
    }
}

fn default_namespace(obj: &mut Value, name: &str) {
    let meta = meta_mut(obj);
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if let Some(l) = labels.as_object_mut() {
        l.insert("kubernetes.io/metadata.name".into(), name.into());
    }
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    if obj["spec"].get("finalizers").is_none() {
        obj["spec"]["finalizers"] = json!(["kubernetes"]);
    }
    obj["status"] = json!({"phase": "Active"});
}

/// The namespaces kube-apiserver refuses to delete.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];
