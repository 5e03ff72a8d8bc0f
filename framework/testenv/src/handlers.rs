//! The verbs on the store: create, get, list, update, patch, delete, deletecollection, each a
//! read-modify-write under the store lock with upstream's semantics (optimistic concurrency,
//! no-op updates that keep the resourceVersion, finalizers holding a deleted object, namespace
//! cascade, exact-resourceVersion and paginated lists).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Value, json};

use crate::admission::{self, AdmissionConfig, Endpoint, IMMORTAL_NAMESPACES};
use crate::continue_token;
use crate::crd;
use crate::fields::{self, Ctx, Writer, set_managed_fields};
use crate::patch::{self, PatchKind};
use crate::resources::{ResId, Strategy, TABLE, lookup};
use crate::selectors::Filter;
use crate::status::{self, ApiError};
use crate::store::{EventType, ObjKey, State};
use crate::types::Served;
use crate::{limits, write_checks};

/// The object a request addresses.
#[derive(Debug, Clone)]
pub struct Target {
    /// Resource type id.
    pub res: ResId,
    /// The type itself (as served when the request was routed).
    pub rt: Served,
    /// Namespace from the URL.
    pub ns: Option<String>,
    /// Name from the URL.
    pub name: Option<String>,
    /// Subresource (`status`, `scale`).
    pub sub: Option<String>,
}

impl Target {
    /// The collection of a built-in v1 type (`group` empty for core), in `ns`.
    pub fn builtin(group: &str, plural: &str, ns: Option<&str>) -> Option<Target> {
        let res = lookup(group, "v1", plural)?;
        Some(Target {
            res,
            rt: Served::Builtin(TABLE.get(res)?),
            ns: ns.map(String::from),
            name: None,
            sub: None,
        })
    }

    /// The same type, another object.
    fn object(&self, ns: String, name: String) -> Target {
        Target {
            res: self.res,
            rt: self.rt.clone(),
            ns: Some(ns),
            name: Some(name),
            sub: None,
        }
    }

    fn ns_key(&self) -> &str {
        if self.rt.namespaced() {
            self.ns.as_deref().unwrap_or("")
        } else {
            ""
        }
    }

    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    fn endpoint(&self) -> Endpoint {
        if self.sub.as_deref() == Some("status") {
            Endpoint::Status
        } else {
            Endpoint::Main
        }
    }

    fn not_found(&self) -> ApiError {
        ApiError::not_found(self.rt.group(), self.rt.plural(), self.name())
    }

    /// 404 when a CRD-defined type was retired after the request was routed.
    fn check_served(&self, state: &State) -> Result<(), ApiError> {
        match state.served(self.res) {
            Some(_) => Ok(()),
            None => Err(self.not_found()),
        }
    }
}

/// How a write was asked for: its query parameters that are not about the object.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// `fieldManager`, or the default derived from the user agent.
    pub manager: String,
    /// Whether the request named its `fieldManager` (server-side apply requires it).
    pub manager_given: bool,
    /// `force=true` (server-side apply takes conflicting fields over).
    pub force: bool,
}

impl WriteOptions {
    /// A write by the server itself (seeding, bootstrap policy) under `manager`.
    pub fn by(manager: &str) -> WriteOptions {
        WriteOptions {
            manager: manager.to_string(),
            ..WriteOptions::default()
        }
    }
}

impl Target {
    fn writer<'a>(
        &'a self,
        opts: &'a WriteOptions,
        api_version: &'a str,
        now: &'a str,
    ) -> Writer<'a> {
        Writer {
            manager: &opts.manager,
            api_version,
            subresource: self.sub.as_deref(),
            now,
        }
    }

    fn fields_ctx(&self, creating: bool) -> Ctx<'_> {
        Ctx {
            rt: &self.rt,
            subresource: if self.sub.as_deref() == Some("status") {
                Some("status")
            } else {
                None
            },
            creating,
        }
    }
}

/// Records the writer's ownership on an admitted object (`old`: the stored state, `None` on
/// create; `requested`: the `managedFields` the request sent).
fn record_update(
    t: &Target,
    old: Option<&Value>,
    requested: Option<Value>,
    new: &mut Value,
    opts: &WriteOptions,
) {
    record_update_of(t, old, requested, new, None, opts)
}

/// `record_update`, with ownership computed on `tracked` when given (see `defaults`).
fn record_update_of(
    t: &Target,
    old: Option<&Value>,
    requested: Option<Value>,
    new: &mut Value,
    tracked: Option<&Value>,
    opts: &WriteOptions,
) {
    let (api_version, now) = (t.rt.api_version(), admission::now());
    let empty = json!({});
    let managed = fields::after_update(
        t.fields_ctx(old.is_none()),
        old.unwrap_or(&empty),
        tracked.unwrap_or(new),
        requested.as_ref(),
        t.writer(opts, &api_version, &now),
    );
    set_managed_fields(new, managed);
}

fn requested_managed_fields(body: &Value) -> Option<Value> {
    body.pointer("/metadata/managedFields").cloned()
}

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
    let tracked = crate::defaults::tracked_on_create(rt, &sent, &obj);
    record_update_of(t, None, requested, &mut obj, tracked.as_ref(), opts);
    if opts.dry_run {
        return Ok((201, obj));
    }
    limits::check_storable(&obj)?;
    let stored = (*state.put(t.res, crd::to_storage(rt, obj), EventType::Added)).clone();
    if rt.strategy() == Strategy::Crd {
        crd::lifecycle::created(state, &stored);
    }
    Ok((201, crd::to_version(rt, stored)))
}

/// GET of one object.
pub fn get(state: &State, t: &Target) -> Result<Value, ApiError> {
    let obj = state
        .get(t.res, t.ns_key(), t.name())
        .ok_or_else(|| t.not_found())?;
    if t.sub.as_deref() == Some("scale") {
        return Ok(crd::scale::of(&t.rt, obj));
    }
    Ok(crd::to_version(&t.rt, (**obj).clone()))
}

/// Parsed list parameters.
#[derive(Debug, Default)]
pub struct ListParams {
    /// Selection.
    pub filter: Filter,
    /// `limit` (0 = none).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub rv_match: Option<String>,
}

/// A list response; serialized without cloning the items, and (as upstream) without each item's
/// `kind` / `apiVersion`.
pub struct ListBody {
    kind: String,
    api_version: String,
    rv: u64,
    cont: Option<String>,
    remaining: Option<usize>,
    items: Vec<Arc<Value>>,
}

struct Item<'a>(&'a Value);

impl Serialize for Item<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_object() {
            Some(m) => {
                let mut map = s.serialize_map(None)?;
                for (k, v) in m {
                    if k != "kind" && k != "apiVersion" {
                        map.serialize_entry(k, v)?;
                    }
                }
                map.end()
            }
            None => self.0.serialize(s),
        }
    }
}

impl Serialize for ListBody {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut meta = serde_json::Map::new();
        meta.insert("resourceVersion".into(), self.rv.to_string().into());
        if let Some(c) = &self.cont {
            meta.insert("continue".into(), c.clone().into());
        }
        if let Some(r) = self.remaining {
            meta.insert("remainingItemCount".into(), r.into());
        }
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("kind", &self.kind)?;
        map.serialize_entry("apiVersion", &self.api_version)?;
        map.serialize_entry("metadata", &meta)?;
        let items: Vec<Item<'_>> = self.items.iter().map(|i| Item(i)).collect();
        map.serialize_entry("items", &items)?;
        map.end()
    }
}

impl ListBody {
    /// The items (for in-process callers).
    pub fn items(&self) -> &[Arc<Value>] {
        &self.items
    }

    /// The list's resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// The `continue` token of a partial list.
    pub fn continue_token(&self) -> Option<&str> {
        self.cont.as_deref()
    }
}

fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))
}

/// GET of a collection.
pub fn list(state: &State, t: &Target, p: &ListParams) -> Result<ListBody, ApiError> {
    let rt = &t.rt;
    let current = state.rv();
    let (list_rv, after) = if let Some(token) = &p.continue_token {
        let (rv, start) = continue_token::decode(token, rt.namespaced())?;
        (rv, Some(start))
    } else {
        let rv = match p.resource_version.as_deref() {
            None | Some("") | Some("0") => current,
            Some(s) => {
                let n = parse_rv(s)?;
                if n > current {
                    return Err(ApiError::too_large_rv(n, current));
                }
                if p.rv_match.as_deref() == Some("Exact") {
                    n
                } else {
                    current
                }
            }
        };
        (rv, None)
    };
    if list_rv < current && list_rv < state.floor() {
        return Err(if p.continue_token.is_some() {
            ApiError::continue_expired()
        } else {
            ApiError::expired(list_rv, state.floor() + 1)
        });
    }
    let ns = t.ns.as_deref().filter(|_| rt.namespaced());
    let snapshot;
    let iter: Box<dyn Iterator<Item = (&ObjKey, &Arc<Value>)>> = if list_rv == current {
        state.iter(t.res, ns, after)
    } else {
        snapshot = state.snapshot_at(t.res, list_rv);
        Box::new(snapshot_iter(&snapshot, ns, after))
    };
    let mut items = Vec::new();
    let mut last_key = None;
    let mut cont = None;
    let mut remaining = None;
    let mut iter = iter.filter(|(_, o)| p.filter.matches(o));
    for (k, o) in iter.by_ref() {
        items.push(o.clone());
        if p.limit > 0 && items.len() == p.limit {
            last_key = Some(k.clone());
            break;
        }
    }
    if let Some(k) = last_key {
        let rest = iter.count();
        if rest > 0 {
            cont = Some(continue_token::encode(list_rv, &k, rt.namespaced()));
            let plain = p.filter.labels == Default::default() && p.filter.fields.is_empty();
            remaining = plain.then_some(rest);
        }
    }
    Ok(ListBody {
        kind: rt.list_kind(),
        api_version: rt.api_version(),
        rv: list_rv,
        cont,
        remaining,
        items,
    })
}

fn snapshot_iter<'a>(
    snap: &'a BTreeMap<ObjKey, Arc<Value>>,
    ns: Option<&'a str>,
    after: Option<ObjKey>,
) -> impl Iterator<Item = (&'a ObjKey, &'a Arc<Value>)> + 'a {
    snap.iter()
        .filter(move |(k, _)| ns.is_none_or(|n| k.0 == n))
        .filter(move |(k, _)| after.as_ref().is_none_or(|a| *k > a))
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
        let key = crate::store::key_of(&new);
        state.remove(res, &key.0, &key.1);
        crd::lifecycle::instance_removed(state, rt);
        return crd::to_version(rt, new);
    }
    let stored = (*state.put(res, new, EventType::Modified)).clone();
    if rt.strategy() == Strategy::Crd {
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
    let (api_version, now) = (rt.api_version(), admission::now());
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
            if opts.dry_run {
                return Ok((201, obj));
            }
            limits::check_storable(&obj)?;
            let stored = (*state.put(t.res, crd::to_storage(rt, obj), EventType::Added)).clone();
            if rt.strategy() == Strategy::Crd {
                crd::lifecycle::created(state, &stored);
            }
            Ok((201, crd::to_version(rt, stored)))
        }
        Some(old) => {
            let mut new = admission::prepare_update(rt, &old, merged, t.endpoint(), state, cfg)?;
            limits::check_storable(&new)?;
            set_managed_fields(&mut new, managed);
            Ok((200, commit(state, t, &old, new, opts.dry_run)))
        }
    }
}

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

/// DELETE of one object: the Status (deleted now) or the object (held by finalizers).
pub fn delete(
    state: &mut State,
    t: &Target,
    opts: &DeleteOptions,
) -> Result<(u16, Value), ApiError> {
    let rt = &t.rt;
    let name = t.name().to_string();
    let old = state
        .get(t.res, t.ns_key(), &name)
        .cloned()
        .ok_or_else(|| t.not_found())?;
    let meta = |k: &str| {
        old.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if let Some(uid) = &opts.uid
        && *uid != meta("uid")
    {
        let why = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta("uid")
        );
        return Err(ApiError::conflict(rt.group(), rt.plural(), &name, &why));
    }
    if let Some(rv) = &opts.resource_version
        && *rv != meta("resourceVersion")
    {
        let why = format!(
            "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
            meta("resourceVersion")
        );
        return Err(ApiError::conflict(rt.group(), rt.plural(), &name, &why));
    }
    if rt.strategy() == Strategy::Crd {
        return Ok((200, crd::lifecycle::delete(state, t, &old, opts.dry_run)));
    }
    if rt.strategy() == Strategy::Namespace {
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
    let has_finalizers = old
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if has_finalizers {
        if old.pointer("/metadata/deletionTimestamp").is_some() || opts.dry_run {
            return Ok((200, (*old).clone()));
        }
        let mut new = (*old).clone();
        new["metadata"]["deletionTimestamp"] = admission::now().into();
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
        let keys: Vec<ObjKey> = state
            .iter(res, Some(ns), None)
            .map(|(k, _)| k.clone())
            .collect();
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
        let (ns, name) = crate::store::key_of(o);
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
