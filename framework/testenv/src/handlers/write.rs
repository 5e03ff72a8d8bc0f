//! The writes: POST, PUT, PATCH and server-side apply, each a read-modify-write with optimistic
//! concurrency, and no-op updates that keep the resourceVersion.

use std::sync::Arc;

use serde_json::Value;

use super::target::{
    Target, WriteOptions, record_update, record_update_of, requested_managed_fields,
};
use crate::admission::write_checks;
use crate::admission::{self, Endpoint};
use crate::api::cluster::AdmissionConfig;
use crate::api::kind::Lifecycle;
use crate::api::limits;
use crate::api::status::{self, ApiError};
use crate::crd;
use crate::fields::{self, set_managed_fields};
use crate::patch::{self, PatchKind};
use crate::storage::store::{EventType, State};

/// POST: 201 with the stored object.
pub fn create(
    state: &mut State,
    cfg: &AdmissionConfig,
    t: &Target,
    body: Value,
    opts: &WriteOptions,
) -> Result<(u16, Value), ApiError> {
    t.check_served(state)?;
    crd::lifecycle::check_creatable(state, &t.rt)?;
    let rt = &t.rt;
    let requested = requested_managed_fields(&body);
    let sent = body.clone();
    let mut obj = admission::prepare_create(rt, t.res, t.ns.as_deref(), body, state, cfg)?;
    let tracked = admission::tracked_on_create(rt, &sent, &obj);
    record_update_of(t, None, requested, &mut obj, tracked.as_ref(), opts);
    store_created(state, t, obj, opts)
}

/// Stores an admitted new object (not on a dry run) and answers 201 with it as requested.
fn store_created(
    state: &mut State,
    t: &Target,
    obj: Value,
    opts: &WriteOptions,
) -> Result<(u16, Value), ApiError> {
    if opts.dry_run {
        return Ok((201, obj));
    }
    let rt = &t.rt;
    limits::check_storable(&obj)?;
    let stored = (*state.put(t.res, crd::to_storage(rt, obj), EventType::Added)).clone();
    if rt.lifecycle() == Lifecycle::CustomResourceDefinition {
        crd::lifecycle::created(state, &stored);
    }
    Ok((201, crd::to_version(rt, stored)))
}

/// Stores `new` as the next state of `old`, deleting it when its last finalizer is gone, and
/// keeping the resourceVersion when nothing changed (upstream no-op update).
fn commit(state: &mut State, t: &Target, old: &Arc<Value>, new: Value, dry_run: bool) -> Value {
    let (res, rt) = (t.res, &t.rt);
    let new = crd::to_storage(rt, new);
    if new == **old || dry_run {
        return crd::to_version(rt, new);
    }
    let terminating = new.pointer("/metadata/deletionTimestamp").is_some();
    let no_finalizers = new
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if terminating && no_finalizers {
        // Upstream aborts the update (errEmptiedFinalizers) and deletes the stored object: watches
        // see one DELETED (of the last stored state), the caller gets its update unsaved, with the
        // old resourceVersion (svc-remove-finalizer.txt).
        let key = crate::storage::store::key_of(&new);
        state.remove(res, &key.0, &key.1);
        crd::lifecycle::instance_removed(state, rt);
        return crd::to_version(rt, new);
    }
    let stored = (*state.put(res, new, EventType::Modified)).clone();
    if rt.lifecycle() == Lifecycle::CustomResourceDefinition {
        crd::lifecycle::updated(state, &stored);
    }
    crd::to_version(rt, stored)
}

/// PUT (main or `/status`).
pub fn update(
    state: &mut State,
    cfg: &AdmissionConfig,
    t: &Target,
    body: Value,
    opts: &WriteOptions,
) -> Result<(u16, Value), ApiError> {
    let dry_run = opts.dry_run;
    t.check_served(state)?;
    let rt = &t.rt;
    let body_name = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if body_name != t.name() {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({})",
            t.name()
        )));
    }
    if rt.namespaced()
        && let Some(body_ns) = body.pointer("/metadata/namespace").and_then(Value::as_str)
        && !body_ns.is_empty()
        && body_ns != t.ns_key()
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let Some(old) = state.get(t.res, t.ns_key(), t.name()).cloned() else {
        if rt.create_on_update() && t.sub.is_none() {
            return create(state, cfg, t, body, opts);
        }
        return Err(t.not_found());
    };
    if t.sub.as_deref() != Some("scale") {
        write_checks::same_uid(rt, t.name(), &old, &body)?;
    }
    if t.sub.as_deref() == Some("scale") {
        let new = crd::scale::update(rt, &old, body)?;
        let new = admission::prepare_update(rt, &old, new, Endpoint::Main, state, cfg)?;
        let stored = commit(state, t, &old, new, dry_run);
        return Ok((200, crd::scale::of(rt, &stored)));
    }
    let requested = requested_managed_fields(&body);
    let mut new = admission::prepare_update(rt, &old, body, t.endpoint(), state, cfg)?;
    limits::check_storable(&new)?;
    record_update(t, Some(&old), requested, &mut new, opts);
    Ok((200, commit(state, t, &old, new, dry_run)))
}

/// PATCH (main or `/status`) with any supported patch type.
pub fn patch(
    state: &mut State,
    cfg: &AdmissionConfig,
    t: &Target,
    kind: PatchKind,
    body: &[u8],
    opts: &WriteOptions,
) -> Result<Value, ApiError> {
    let dry_run = opts.dry_run;
    t.check_served(state)?;
    let rt = &t.rt;
    let old = state
        .get(t.res, t.ns_key(), t.name())
        .cloned()
        .ok_or_else(|| t.not_found())?;
    if t.sub.as_deref() == Some("scale") {
        let scale = crd::scale::of(rt, &old);
        let patched = patch::apply(rt, kind, &scale, body)?;
        let new = crd::scale::update(rt, &old, patched)?;
        let new = admission::prepare_update(rt, &old, new, Endpoint::Main, state, cfg)?;
        let stored = commit(state, t, &old, new, dry_run);
        return Ok(crd::scale::of(rt, &stored));
    }
    let old_at_version = crd::to_version(rt, (*old).clone());
    let patched = patch::apply(rt, kind, &old_at_version, body)?;
    write_checks::patched(rt, t.name(), &old, &patched)?;
    // A patch that leaves managedFields alone sends the stored ones back: ownership then
    // follows the write; one that sets them (e.g. to `[{}]`) asks for that.
    let requested = requested_managed_fields(&patched)
        .filter(|m| old.pointer("/metadata/managedFields") != Some(m));
    let mut new = admission::prepare_update(rt, &old, patched, t.endpoint(), state, cfg)?;
    limits::check_storable(&new)?;
    record_update(t, Some(&old), requested, &mut new, opts);
    Ok(commit(state, t, &old, new, dry_run))
}

/// Server-side apply (PATCH with `application/apply-patch+yaml`): creates the object when it
/// does not exist (201), else merges the configuration into it (200).
pub fn apply(
    state: &mut State,
    cfg: &AdmissionConfig,
    t: &Target,
    body: &[u8],
    opts: &WriteOptions,
) -> Result<(u16, Value), ApiError> {
    t.check_served(state)?;
    let rt = &t.rt;
    if !opts.manager_given {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            vec![status::Cause::required(
                "fieldManager",
                "is required for apply patch",
            )],
        ));
    }
    if t.sub.as_deref() == Some("scale") {
        return Err(ApiError::unsupported_media_type());
    }
    let config = patch::decode_apply(body)?;
    patch::check_apply_config(rt, &config, t.name())?;
    let old = state.get(t.res, t.ns_key(), t.name()).cloned();
    let (api_version, now) = (rt.api_version(), crate::api::meta::now());
    let w = t.writer(opts, &api_version, &now);
    let ctx = t.fields_ctx(old.is_none());
    let live = old.as_ref().map(|o| crd::to_version(rt, (**o).clone()));
    let (merged, managed) = fields::apply(ctx, live.as_ref(), &config, w, opts.force)?;
    match old {
        None => {
            if t.sub.is_some() {
                return Err(t.not_found());
            }
            crd::lifecycle::check_creatable(state, rt)?;
            let mut obj =
                admission::prepare_create(rt, t.res, t.ns.as_deref(), merged, state, cfg)?;
            set_managed_fields(&mut obj, managed);
            store_created(state, t, obj, opts)
        }
        Some(old) => {
            let mut new = admission::prepare_update(rt, &old, merged, t.endpoint(), state, cfg)?;
            limits::check_storable(&new)?;
            set_managed_fields(&mut new, managed);
            Ok((200, commit(state, t, &old, new, opts.dry_run)))
        }
    }
}
