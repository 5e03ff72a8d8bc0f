//! The writes: POST, PUT, PATCH and server-side apply, each a read-modify-write with optimistic
//! concurrency, and no-op updates that keep the resourceVersion. Each is cut where
//! `admission::chain` puts admission webhooks between its steps: [`Staged`] (the request's object
//! and the stored one), [`prepare`] (the server's preparation and validation of the object the
//! mutating webhooks left) and [`commit`] (stored if the stored object is still the one staged).
//! [`create`] runs the three at once, for the server's own writes.

use std::sync::Arc;

use serde_json::Value;

use super::target::{
    Target, WriteOptions, record_update, record_update_of, requested_managed_fields,
};
use crate::admission::policies::status as policy_status;
use crate::admission::write_checks;
use crate::admission::{self, Endpoint, chain};
use crate::api::cluster::AdmissionConfig;
use crate::api::kind::Lifecycle;
use crate::api::limits;
use crate::api::status::{self, ApiError};
use crate::crd;
use crate::fields::{self, set_managed_fields};
use crate::patch::{self, PatchKind};
use crate::storage::store::{EventType, State, rv_of};

/// How a staged object becomes the stored one.
#[derive(Debug, Clone)]
pub(super) enum Mode {
    /// A new object (POST; PUT or apply of a missing one); `sent` is the body as sent.
    Create { sent: Value },
    /// A change of the stored object through the main endpoint or `/status`.
    Update { endpoint: Endpoint },
    /// A change through `/scale`: the object is an `autoscaling/v1` Scale.
    Scale,
}

/// Who owns which fields after the write.
#[derive(Debug, Clone)]
pub(super) enum Ownership {
    /// An ordinary write, recorded on the prepared object (`managedFields` the request sent).
    Record(Option<Value>),
    /// Server-side apply: what the merge computed.
    Given(Option<Value>),
    /// A `/scale` write records none.
    Untracked,
}

/// A write taken up to admission.
#[derive(Debug, Clone)]
pub struct Staged {
    pub(super) t: Target,
    /// The stored object (none on create).
    pub(super) old: Option<Arc<Value>>,
    /// The request's object: the body, the patched or the merged object, a Scale.
    pub(super) candidate: Value,
    pub(super) mode: Mode,
    pub(super) ownership: Ownership,
    pub(super) opts: WriteOptions,
    /// The candidate through `chain::prepare_*`, ownership recorded: what is stored when no
    /// mutating webhook is called, and the ownership the write records when one is.
    pub(super) first: Result<Value, ApiError>,
}

/// A staged write's object after `chain::prepare_*`, for [`commit`].
#[derive(Debug, Clone)]
pub struct Prepared {
    object: Value,
    /// Whether mutating webhooks were called: then the object keeps the ownership recorded
    /// before them; otherwise ownership is recorded again on the admitted object.
    mutated: bool,
}

/// POST (and PUT or apply of a missing object): the body, checked for what comes before
/// admission (a served type, a creatable CRD, an open namespace).
pub(super) fn stage_create(
    state: &State,
    t: &Target,
    body: Value,
    opts: &WriteOptions,
    ownership: Option<Ownership>,
) -> Result<Staged, ApiError> {
    t.check_served(state)?;
    crd::lifecycle::check_creatable(state, &t.rt)?;
    if let Some(ns) = t.ns.as_deref().filter(|_| t.rt.namespaced()) {
        admission::check_namespace_open(state, ns)?;
    }
    let ownership = ownership.unwrap_or_else(|| Ownership::Record(requested_managed_fields(&body)));
    Ok(staged(
        t,
        None,
        body.clone(),
        Mode::Create { sent: body },
        ownership,
        opts,
    ))
}

/// PUT (main, `/status` or `/scale`).
pub(super) fn stage_update(
    state: &State,
    t: &Target,
    body: Value,
    opts: &WriteOptions,
    view: Option<&Arc<Value>>,
) -> Result<Staged, ApiError> {
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
    let Some(old) = stored(state, t, view) else {
        if rt.create_on_update() && t.sub.is_none() {
            return stage_create(state, t, body, opts, None);
        }
        return Err(t.not_found());
    };
    if t.sub.as_deref() == Some("scale") {
        return Ok(staged(
            t,
            Some(old),
            body,
            Mode::Scale,
            Ownership::Untracked,
            opts,
        ));
    }
    write_checks::same_uid(rt, t.name(), &old, &body)?;
    let ownership = Ownership::Record(requested_managed_fields(&body));
    let mode = Mode::Update {
        endpoint: t.endpoint(),
    };
    Ok(staged(t, Some(old), body, mode, ownership, opts))
}

/// PATCH (main, `/status` or `/scale`) with any supported patch type.
pub(super) fn stage_patch(
    state: &State,
    t: &Target,
    kind: PatchKind,
    body: &[u8],
    opts: &WriteOptions,
    view: Option<&Arc<Value>>,
) -> Result<Staged, ApiError> {
    t.check_served(state)?;
    let rt = &t.rt;
    let old = stored(state, t, view).ok_or_else(|| t.not_found())?;
    if t.sub.as_deref() == Some("scale") {
        let patched = patch::apply(rt, kind, &crd::scale::of(rt, &old), body)?;
        return Ok(staged(
            t,
            Some(old),
            patched,
            Mode::Scale,
            Ownership::Untracked,
            opts,
        ));
    }
    let old_at_version = crd::to_version(rt, (*old).clone());
    let patched = patch::apply(rt, kind, &old_at_version, body)?;
    write_checks::patched(rt, t.name(), &old, &patched)?;
    // A patch that leaves managedFields alone sends the stored ones back: ownership then
    // follows the write; one that sets them (e.g. to `[{}]`) asks for that.
    let requested = requested_managed_fields(&patched)
        .filter(|m| old.pointer("/metadata/managedFields") != Some(m));
    let mode = Mode::Update {
        endpoint: t.endpoint(),
    };
    Ok(staged(
        t,
        Some(old),
        patched,
        mode,
        Ownership::Record(requested),
        opts,
    ))
}

/// Server-side apply (PATCH with `application/apply-patch+yaml`): the configuration merged
/// into the stored object, or the object it creates.
pub(super) fn stage_apply(
    state: &State,
    t: &Target,
    body: &[u8],
    opts: &WriteOptions,
    view: Option<&Arc<Value>>,
) -> Result<Staged, ApiError> {
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
    let old = stored(state, t, view);
    let (api_version, now) = (rt.api_version(), crate::api::meta::now());
    let w = t.writer(opts, &api_version, &now);
    let ctx = t.fields_ctx(old.is_none());
    let live = old.as_ref().map(|o| crd::to_version(rt, (**o).clone()));
    let (merged, managed) = fields::apply(ctx, live.as_ref(), &config, w, opts.force)?;
    match old {
        None if t.sub.is_some() => Err(t.not_found()),
        None => stage_create(state, t, merged, opts, Some(Ownership::Given(managed))),
        Some(old) => {
            let mode = Mode::Update {
                endpoint: t.endpoint(),
            };
            Ok(staged(
                t,
                Some(old),
                merged,
                mode,
                Ownership::Given(managed),
                opts,
            ))
        }
    }
}

/// The stored object, or `view`: the stored object as the request's version shows it, when a
/// conversion webhook converted it (`crd::conversion`).
fn stored(state: &State, t: &Target, view: Option<&Arc<Value>>) -> Option<Arc<Value>> {
    view.cloned()
        .or_else(|| state.get(t.res, t.ns_key(), t.name()).cloned())
}

fn staged(
    t: &Target,
    old: Option<Arc<Value>>,
    candidate: Value,
    mode: Mode,
    ownership: Ownership,
    opts: &WriteOptions,
) -> Staged {
    let mut s = Staged {
        t: t.clone(),
        old,
        candidate,
        mode,
        ownership,
        opts: opts.clone(),
        first: Ok(Value::Null),
    };
    let first = prepare_object(&s, s.candidate.clone()).map(|mut obj| {
        record_ownership(&s, &mut obj);
        obj
    });
    s.first = first;
    s
}

/// The server's own preparation and validation of `object` for `s` (`chain` steps 1 to 3).
fn prepare_object(s: &Staged, object: Value) -> Result<Value, ApiError> {
    let (t, rt) = (&s.t, &s.t.rt);
    match (&s.mode, &s.old) {
        (Mode::Create { .. }, _) | (_, None) => chain::prepare_create(rt, t.ns.as_deref(), object),
        (Mode::Update { endpoint }, Some(old)) => {
            let new = chain::prepare_update(rt, old, object, *endpoint)?;
            limits::check_storable(&new)?;
            Ok(new)
        }
        (Mode::Scale, Some(old)) => {
            let new = crd::scale::update(rt, old, object)?;
            chain::prepare_update(rt, old, new, Endpoint::Main)
        }
    }
}

/// Records the write's ownership on its prepared object.
fn record_ownership(s: &Staged, obj: &mut Value) {
    let opts = &s.opts;
    match (&s.ownership, &s.mode) {
        (Ownership::Given(managed), _) => set_managed_fields(obj, managed.clone()),
        (Ownership::Record(requested), Mode::Create { sent }) => {
            let tracked = admission::tracked_on_create(&s.t.rt, sent, obj);
            record_update_of(&s.t, None, requested.clone(), obj, tracked.as_ref(), opts);
        }
        (Ownership::Record(requested), _) => {
            record_update(&s.t, s.old.as_deref(), requested.clone(), obj, opts)
        }
        (Ownership::Untracked, _) => {}
    }
}

/// The `managedFields` the write records (what mutating webhooks see: upstream records them
/// before admission, so what webhooks change belongs to nobody).
pub(super) fn ownership_view(s: &Staged) -> Option<Value> {
    match (&s.first, &s.ownership) {
        (_, Ownership::Untracked) => None,
        (_, Ownership::Given(managed)) => managed.clone(),
        (Ok(obj), _) => obj.pointer("/metadata/managedFields").cloned(),
        // The request's own object does not prepare (a mutating webhook may still mend it):
        // its ownership as sent.
        (Err(_), _) => {
            let mut view = s.candidate.clone();
            record_ownership(s, &mut view);
            view.pointer("/metadata/managedFields").cloned()
        }
    }
}

/// Step 3: `mutated` (what the mutating webhooks left; `None` when none ran) prepared, with
/// the ownership the request recorded (`managed`).
pub(super) fn prepare(
    s: &Staged,
    mutated: Option<Value>,
    managed: Option<Value>,
) -> Result<Prepared, ApiError> {
    let Some(object) = mutated else {
        return s.first.clone().map(|object| Prepared {
            object,
            mutated: false,
        });
    };
    let mut object = prepare_object(s, object)?;
    if !matches!(s.ownership, Ownership::Untracked) {
        set_managed_fields(&mut object, managed);
    }
    Ok(Prepared {
        object,
        mutated: true,
    })
}

impl Prepared {
    /// The prepared object.
    pub fn object(&self) -> &Value {
        &self.object
    }

    /// Step 4, the kind's step against the cluster (a Service's allocations), on the prepared
    /// object, before the validating webhooks see it.
    pub fn cluster_step(
        &mut self,
        state: &State,
        cfg: &AdmissionConfig,
        s: &Staged,
    ) -> Result<(), ApiError> {
        let old = s
            .old
            .as_deref()
            .filter(|_| !matches!(s.mode, Mode::Create { .. }));
        chain::cluster_step(&s.t.rt, &mut self.object, old, state, cfg)
    }
}

/// Step 6: stores `obj`, or `None` when the stored object is no longer the staged one (or what
/// step 4 allocated was taken).
pub(super) fn commit(
    state: &mut State,
    cfg: &AdmissionConfig,
    s: &Staged,
    prepared: Prepared,
) -> Result<Option<(u16, Value)>, ApiError> {
    let (t, rt) = (&s.t, &s.t.rt);
    let record = |mut obj: Value| {
        if !prepared.mutated {
            record_ownership(s, &mut obj);
        }
        obj
    };
    match (&s.mode, &s.old) {
        (Mode::Create { .. }, _) | (_, None) => {
            let ns = t.ns.as_deref();
            let obj = chain::admit_create(rt, t.res, ns, prepared.object.clone(), state, cfg)?;
            let Some(obj) = obj else { return Ok(None) };
            store_created(state, t, record(obj), s.opts.dry_run).map(Some)
        }
        (mode, Some(old)) => {
            let current = state.get(t.res, t.ns_key(), t.name());
            if current.map(|c| rv_of(c)) != Some(rv_of(old)) {
                return Ok(None);
            }
            let obj = chain::admit_update(rt, old, prepared.object.clone(), state, cfg);
            let Some(obj) = obj else { return Ok(None) };
            let stored = commit_update(state, t, old, record(obj), s.opts.dry_run);
            match mode {
                Mode::Scale => Ok(Some((200, crd::scale::of(&t.rt, &stored)))),
                _ => Ok(Some((200, stored))),
            }
        }
    }
}

/// Stores `obj`, already converted to the storage version by a conversion webhook, as `s`
/// staged it (`None` when the stored object changed since); the stored object at the request's
/// `apiVersion`.
pub(super) fn store_converted(
    state: &mut State,
    s: &Staged,
    obj: Value,
) -> Result<Option<Value>, ApiError> {
    let t = &s.t;
    let current = state.get(t.res, t.ns_key(), t.name()).cloned();
    match (&s.mode, &s.old) {
        (Mode::Create { .. }, _) | (_, None) => {
            let name = obj.pointer("/metadata/name").and_then(Value::as_str);
            let name = name.unwrap_or("").to_string();
            if state.get(t.res, t.ns_key(), &name).is_some() {
                return Err(ApiError::already_exists(t.rt.group(), t.rt.plural(), &name));
            }
            store_created(state, t, obj, false).map(|(_, v)| Some(v))
        }
        (_, Some(old)) => match current {
            Some(current) if rv_of(&current) == rv_of(old) => {
                Ok(Some(commit_update(state, t, &current, obj, false)))
            }
            _ => Ok(None),
        },
    }
}

/// Stores an admitted new object (not on a dry run) and answers 201 with it as requested.
fn store_created(
    state: &mut State,
    t: &Target,
    obj: Value,
    dry_run: bool,
) -> Result<(u16, Value), ApiError> {
    if dry_run {
        return Ok((201, obj));
    }
    let rt = &t.rt;
    limits::check_storable(&obj)?;
    let stored = (*state.put(t.res, crd::to_storage(rt, obj), EventType::Added)).clone();
    match rt.lifecycle() {
        Lifecycle::CustomResourceDefinition => crd::lifecycle::created(state, &stored),
        Lifecycle::AdmissionPolicy => policy_status::reconcile(state, t.res, &stored),
        _ => {}
    }
    Ok((201, crd::to_version(rt, stored)))
}

/// Stores `new` as the next state of `old`, deleting it when its last finalizer is gone, and
/// keeping the resourceVersion when nothing changed (upstream no-op update).
fn commit_update(
    state: &mut State,
    t: &Target,
    old: &Arc<Value>,
    new: Value,
    dry_run: bool,
) -> Value {
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
    match rt.lifecycle() {
        Lifecycle::CustomResourceDefinition => crd::lifecycle::updated(state, &stored),
        Lifecycle::AdmissionPolicy => policy_status::reconcile(state, res, &stored),
        _ => {}
    }
    crd::to_version(rt, stored)
}

/// Every step at once, for a write no webhook sees.
fn at_once(
    state: &mut State,
    cfg: &AdmissionConfig,
    s: Result<Staged, ApiError>,
) -> Result<(u16, Value), ApiError> {
    let s = s?;
    let prepared = prepare(&s, None, None)?;
    commit(state, cfg, &s, prepared)?.ok_or_else(|| ApiError::internal("the stored object changed"))
}

/// POST: 201 with the stored object.
pub fn create(
    state: &mut State,
    cfg: &AdmissionConfig,
    t: &Target,
    body: Value,
    opts: &WriteOptions,
) -> Result<(u16, Value), ApiError> {
    let s = stage_create(state, t, body, opts, None);
    at_once(state, cfg, s)
}
