//! A create, update, patch or apply as one write through the admission chain
//! (`admission::chain`): its steps as a [`Write`], and what its webhooks are told (the review's
//! kind, resource, subresource, name, namespace, user, options and objects, as upstream's
//! handlers build their admission attributes).

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use super::target::{Target, WriteOptions};
use super::write::{self, Mode, Prepared, Staged};
use crate::admission::chain::{self, Write};
use crate::admission::webhooks::{Gvk, Gvr, Objects, Request, Requester};
use crate::api::cluster::AdmissionConfig;
use crate::api::status::ApiError;
use crate::crd;
use crate::fields::set_managed_fields;
use crate::patch::PatchKind;
use crate::storage::store::{State, rv_of};

/// What a write asks for.
#[derive(Debug, Clone, Copy)]
pub enum Verb<'a> {
    /// POST with this object.
    Create(&'a Value),
    /// PUT with this object.
    Update(&'a Value),
    /// PATCH of this type with this body.
    Patch(PatchKind, &'a [u8]),
    /// Server-side apply of this body.
    Apply(&'a [u8]),
}

/// A create, update, patch or apply through the chain.
pub(super) struct ObjectWrite<'a> {
    pub(super) cfg: &'a AdmissionConfig,
    pub(super) t: &'a Target,
    pub(super) verb: Verb<'a>,
    pub(super) opts: &'a WriteOptions,
    pub(super) user: &'a Requester,
    /// The stored object as the request's version shows it, when a conversion webhook made it.
    pub(super) view: Option<Arc<Value>>,
    /// When set, the write is not stored: its staged write and the object it would store are
    /// left here (for `converted`, which stores it once converted to the storage version).
    pub(super) held: Option<&'a Mutex<Option<(Staged, Value)>>>,
}

impl Write for ObjectWrite<'_> {
    /// The staged write and the ownership it records.
    type Staged = (Staged, Option<Value>);
    type Prepared = (Staged, Prepared);

    fn stage(&self, state: &mut State) -> Result<(Self::Staged, Request, Objects), ApiError> {
        let (t, opts, view) = (self.t, self.opts, self.view.as_ref());
        if let Some(view) = view {
            // The stored object changed since it was converted for this write: a conflict, as
            // the write cannot start again from a view it has not got.
            let stored = state.get(t.res, t.ns_key(), t.name());
            if stored.map(|o| rv_of(o)) != Some(rv_of(view)) {
                return Err(ApiError::stale(t.rt.group(), t.rt.plural(), t.name()));
            }
        }
        let s = match self.verb {
            Verb::Create(body) => write::stage_create(state, t, body.clone(), opts, None),
            Verb::Update(body) => write::stage_update(state, t, body.clone(), opts, view),
            Verb::Patch(kind, body) => write::stage_patch(state, t, kind, body, opts, view),
            Verb::Apply(body) => write::stage_apply(state, t, body, opts, view),
        }?;
        let managed = write::ownership_view(&s);
        let req = request(&s, opts, self.user);
        let objects = Objects {
            object: Some(mutating_view(&s, managed.clone())),
            old: old_view(&s),
        };
        Ok(((s, managed), req, objects))
    }

    fn redefault(&self, object: &mut Value) -> Result<(), String> {
        chain::decoded(&self.t.rt, object)
    }

    fn prepare(
        &self,
        state: &mut State,
        (s, managed): Self::Staged,
        mutated: Option<Value>,
    ) -> Result<(Self::Prepared, Objects), ApiError> {
        let mut obj = write::prepare(&s, mutated, managed)?;
        obj.cluster_step(state, self.cfg, &s)?;
        let view = match s.mode {
            Mode::Scale => crd::scale::of(&s.t.rt, obj.object()),
            _ => obj.object().clone(),
        };
        let objects = Objects {
            object: Some(view),
            old: old_view(&s),
        };
        Ok(((s, obj), objects))
    }

    fn commit(
        &self,
        state: &mut State,
        (mut s, obj): Self::Prepared,
    ) -> Result<Option<(u16, Value)>, ApiError> {
        let Some(held) = self.held else {
            return write::commit(state, self.cfg, &s, obj);
        };
        let real_dry_run = s.opts.dry_run;
        s.opts.dry_run = true;
        let answer = write::commit(state, self.cfg, &s, obj)?;
        s.opts.dry_run = real_dry_run;
        if let (Some((_, object)), Ok(mut held)) = (&answer, held.lock()) {
            *held = Some((s, object.clone()));
        }
        Ok(answer)
    }
}

/// What the webhooks of a write are told about it.
fn request(s: &Staged, opts: &WriteOptions, user: &Requester) -> Request {
    let creating = matches!(s.mode, Mode::Create { .. });
    let name = s.t.name.clone().unwrap_or_else(|| {
        let sent = s
            .candidate
            .pointer("/metadata/name")
            .and_then(Value::as_str);
        sent.unwrap_or("").to_string()
    });
    let mut options = Map::new();
    let kind = if creating {
        "CreateOptions"
    } else {
        "UpdateOptions"
    };
    options.insert("kind".into(), kind.into());
    options.insert("apiVersion".into(), "meta.k8s.io/v1".into());
    if opts.dry_run {
        options.insert("dryRun".into(), json!(["All"]));
    }
    if opts.manager_given {
        options.insert("fieldManager".into(), opts.manager.clone().into());
    }
    let operation = if creating { "CREATE" } else { "UPDATE" };
    attributes(
        &s.t,
        operation,
        name,
        creating,
        user,
        opts.dry_run,
        Value::Object(options),
    )
}

pub(super) fn attributes(
    t: &Target,
    operation: &'static str,
    name: String,
    creating: bool,
    user: &Requester,
    dry_run: bool,
    options: Value,
) -> Request {
    let rt = &t.rt;
    let kind = match t.sub.as_deref() {
        Some("scale") => Gvk {
            group: "autoscaling".into(),
            version: "v1".into(),
            kind: "Scale".into(),
        },
        _ => Gvk {
            group: rt.group().into(),
            version: rt.version().into(),
            kind: rt.kind().into(),
        },
    };
    let namespace = match (rt.group(), rt.plural()) {
        // A Namespace's requests name it as their namespace, but for its create.
        ("", "namespaces") if !creating => name.clone(),
        _ if rt.namespaced() => t.ns.clone().unwrap_or_default(),
        _ => String::new(),
    };
    Request {
        operation,
        kind,
        resource: Gvr {
            group: rt.group().into(),
            version: rt.version().into(),
            resource: rt.plural().into(),
        },
        sub_resource: t.sub.clone().unwrap_or_default(),
        name,
        namespace,
        user: user.clone(),
        dry_run,
        options,
        crd: rt.custom().map(|c| c.crd.clone()),
        typed: rt.custom().is_none(),
    }
}

/// The request's object as the mutating webhooks get it: as decoded (its kind's defaults at
/// decode, a custom resource pruned and defaulted), with the ownership the write records.
fn mutating_view(s: &Staged, managed: Option<Value>) -> Value {
    let mut v = s.candidate.clone();
    if matches!(s.mode, Mode::Scale) || !v.is_object() {
        return v;
    }
    let rt = &s.t.rt;
    v["kind"] = rt.kind().into();
    v["apiVersion"] = rt.api_version().into();
    let _ = chain::decoded(rt, &mut v);
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = json!({});
    }
    set_managed_fields(&mut v, managed);
    v
}

/// The stored object, as the written version shows it.
fn old_view(s: &Staged) -> Option<Value> {
    let old = s.old.as_deref()?;
    Some(match s.mode {
        Mode::Scale => crd::scale::of(&s.t.rt, old),
        _ => crd::to_version(&s.t.rt, old.clone()),
    })
}
