//! DELETE of one object and of a collection: preconditions, finalizers holding a deleted object,
//! the namespace cascade and a CRD's instances.

use std::sync::Arc;

use serde_json::{Value, json};

use super::read::{ListParams, list};
use super::target::Target;
use crate::api::kind::Lifecycle;
use crate::api::kinds::{IMMORTAL_NAMESPACES, ResId};
use crate::api::status::{self, ApiError};
use crate::api::types::Served;
use crate::crd;
use crate::storage::store::{EventType, ObjKey, State};

/// Parsed DeleteOptions (body and query).
#[derive(Debug, Default)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Reads the JSON body of a DELETE (may be empty).
    pub fn from_body(body: &[u8], dry_run: bool) -> Result<DeleteOptions, ApiError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(DeleteOptions {
                dry_run,
                ..Default::default()
            });
        }
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(String::from);
        let body_dry = v
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"));
        Ok(DeleteOptions {
            uid: s("/preconditions/uid"),
            resource_version: s("/preconditions/resourceVersion"),
            dry_run: dry_run || body_dry,
        })
    }
}

fn meta_str(obj: &Value, k: &str) -> String {
    obj.pointer(&format!("/metadata/{k}"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The object a DELETE removes, if it exists and meets the request's preconditions.
pub fn precheck(state: &State, t: &Target, opts: &DeleteOptions) -> Result<Arc<Value>, ApiError> {
    let rt = &t.rt;
    let name = t.name();
    let old = state
        .get(t.res, t.ns_key(), name)
        .cloned()
        .ok_or_else(|| t.not_found())?;
    let meta = |k: &str| meta_str(&old, k);
    let preconditions = [
        (&opts.uid, "uid", "UID"),
        (&opts.resource_version, "resourceVersion", "ResourceVersion"),
    ];
    for (given, field, what) in preconditions {
        if let Some(given) = given
            && *given != meta(field)
        {
            let why = format!(
                "Precondition failed: {what} in precondition: {given}, {what} in object meta: {}",
                meta(field)
            );
            return Err(ApiError::conflict(rt.group(), rt.plural(), name, &why));
        }
    }
    Ok(old)
}

/// DELETE of one object: the Status (deleted now) or the object (held by finalizers).
pub fn delete(
    state: &mut State,
    t: &Target,
    opts: &DeleteOptions,
) -> Result<(u16, Value), ApiError> {
    let rt = &t.rt;
    let name = t.name().to_string();
    let old = precheck(state, t, opts)?;
    let meta = |k: &str| meta_str(&old, k);
    match rt.lifecycle() {
        Lifecycle::CustomResourceDefinition => {
            return Ok((200, delete_crd(state, t, &old, opts.dry_run)));
        }
        Lifecycle::Namespace => {
            if IMMORTAL_NAMESPACES.contains(&name.as_str()) {
                return Err(ApiError::forbidden(
                    rt.group(),
                    rt.plural(),
                    &name,
                    "this namespace may not be deleted",
                ));
            }
            if !opts.dry_run {
                delete_namespace_content(state, &name);
            }
        }
        Lifecycle::Object | Lifecycle::AdmissionPolicy => {}
    }
    let has_finalizers = old
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if has_finalizers {
        if old.pointer("/metadata/deletionTimestamp").is_some() || opts.dry_run {
            return Ok((200, (*old).clone()));
        }
        let mut new = (*old).clone();
        new["metadata"]["deletionTimestamp"] = crate::api::meta::now().into();
        new["metadata"]["deletionGracePeriodSeconds"] = 0.into();
        // Upstream bumps a generational object's generation when its deletion starts.
        if let Some(g) = new.pointer("/metadata/generation").and_then(Value::as_i64)
            && g > 0
        {
            new["metadata"]["generation"] = (g + 1).into();
        }
        let stored = (*state.put(t.res, new, EventType::Modified)).clone();
        return Ok((200, crd::to_version(rt, stored)));
    }
    let uid = meta("uid");
    if !opts.dry_run {
        state.remove(t.res, t.ns_key(), &name);
        crd::lifecycle::instance_removed(state, rt);
    }
    Ok((
        200,
        status::delete_success(rt.group(), rt.plural(), &name, &uid),
    ))
}

/// DELETE of a CRD: marks it terminating (the response), then deletes its objects; when none
/// is left the cleanup finalizer goes and, with no other finalizer, the CRD and its types too.
fn delete_crd(state: &mut State, t: &Target, old: &Value, dry_run: bool) -> Value {
    if dry_run {
        return old.clone();
    }
    let Some(response) = crd::lifecycle::mark_terminating(state, t.res, old) else {
        return old.clone();
    };
    let name = response
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    delete_crd_instances(state, &name);
    crd::lifecycle::finish_if_empty(state, &name);
    response
}

/// Deletes every object of a terminating CRD's types, as an ordinary DELETE of each.
fn delete_crd_instances(state: &mut State, crd_name: &str) {
    let Some((res, rt)) = state
        .types()
        .of_crd(crd_name)
        .into_iter()
        .next()
        .map(|(id, c)| (id, Served::Custom(c)))
    else {
        return;
    };
    delete_all(state, res, rt, None);
}

/// Deletes every namespaced object in a namespace being deleted (upstream's namespace controller
/// does this asynchronously; here it happens at once).
fn delete_namespace_content(state: &mut State, ns: &str) {
    let mut done = Vec::new();
    for (res, rt) in state.types().all() {
        // Every version of a CRD addresses the same objects: visit them once.
        let objects = rt.custom().map_or(res, |c| c.objects);
        if !rt.namespaced() || done.contains(&objects) {
            continue;
        }
        done.push(objects);
        delete_all(state, res, rt, Some(ns));
    }
}

/// Deletes every object of one type (in `ns` only, when given), each as an ordinary DELETE, so
/// finalizers, owners and watch events behave as for a client's request.
fn delete_all(state: &mut State, res: ResId, rt: Served, ns: Option<&str>) {
    let keys: Vec<ObjKey> = state.iter(res, ns, None).map(|(k, _)| k.clone()).collect();
    let all = Target {
        res,
        rt,
        ns: None,
        name: None,
        sub: None,
    };
    for (kns, kname) in keys {
        let _ = delete(state, &all.object(kns, kname), &DeleteOptions::default());
    }
}

/// DELETE of a collection: deletes what the selectors match, returns them as a list.
pub fn delete_collection(
    state: &mut State,
    t: &Target,
    p: &ListParams,
    opts: &DeleteOptions,
) -> Result<Value, ApiError> {
    let rt = &t.rt;
    let listed = list(
        state,
        t,
        &ListParams {
            filter: p.filter.clone(),
            ..Default::default()
        },
    )?;
    let mut items = Vec::new();
    for o in listed.items() {
        let (ns, name) = crate::storage::store::key_of(o);
        match delete(state, &t.object(ns, name), opts) {
            Ok((_, v)) if v["kind"] == "Status" => items.push(crd::to_version(rt, (**o).clone())),
            Ok((_, v)) => items.push(v),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(
        json!({"kind": rt.list_kind(), "apiVersion": rt.api_version(), "metadata": {"resourceVersion": state.rv().to_string()}, "items": items}),
    )
}
