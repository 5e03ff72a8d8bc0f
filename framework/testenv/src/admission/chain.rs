//! The steps of one write, in order, in one place. Every create and update (POST, PUT, each
//! patch's result, server-side apply) goes through [`prepare_create`] or [`prepare_update`]
//! before the store takes it; the first step that refuses answers the request.
//!
//! 1. Object meta (`object_meta`). Create: the type meta; uid, creationTimestamp and generation
//!    set, the rest of what only the server sets dropped; generateName; the namespace from the
//!    URL; a name required. Update: the resourceVersion precondition (409); the type meta; the
//!    metadata that cannot change kept; no new finalizers on a terminating object (422); the
//!    status-subresource split by endpoint.
//! 2. Mutation (`strategy`): the kind's prepare (PrepareForCreate / PrepareForUpdate), then on
//!    update the generation, then its defaults, then on create its admission plugins (a Pod's
//!    ServiceAccount, tolerations, priority); a custom resource's schema prunes and defaults.
//! 3. Validation: on create the kind's name rule, then the object-meta rules, then the kind's
//!    own rules or the custom resource's schema; any cause is a 422.
//! 4. Storage preconditions, on create: the namespace is open (`namespace`: 404, 403) and the
//!    name is free (409). (On update the handler has found the object.)
//! 5. The kind's step against the cluster (`strategy`): a Service's addresses allocated or kept,
//!    a new Node's not-ready taint, a new Namespace's finalizer; a Node's immutable fields.
//!
//! Mutating admission webhooks go after the kind's defaults and create-time plugins, CEL rules
//! with the validation step, ValidatingAdmissionPolicy and validating webhooks after it: the
//! places are marked below. (kube-apiserver runs a strategy's PrepareForCreate, here the CRD's
//! `prepare`, and a few of this chain's cluster steps, such as a Node's taint, in other places
//! relative to its webhooks; docs/webhooks.md has the order the webhooks change follows.)

use serde_json::Value;

use super::object_meta::{self, Endpoint};
use super::{namespace, strategy};
use crate::api::cluster::AdmissionConfig;
use crate::api::kinds::ResId;
use crate::api::status::{ApiError, Cause};
use crate::api::types::Served;
use crate::storage::store::State;

/// Fills in and checks everything a create needs; `ns` is the namespace from the URL.
pub fn prepare_create(
    rt: &Served,
    res: ResId,
    ns: Option<&str>,
    obj: Value,
    state: &State,
    cfg: &AdmissionConfig,
) -> Result<Value, ApiError> {
    let (mut obj, name) = object_meta::create(rt, ns, obj)?;
    strategy::prepare(rt, &mut obj, None);
    strategy::defaults(rt, &mut obj);
    strategy::on_create(rt, &mut obj);
    // Mutating admission webhooks go here.
    let mut causes = object_meta::name_causes(rt.name_rule(), &name);
    causes.extend(object_causes(rt, &obj, None));
    refuse_invalid(rt, &name, causes)?;
    // Validating admission (policies, webhooks) goes here.
    if let Some(ns) = ns.filter(|_| rt.namespaced()) {
        namespace::check_open(state, ns)?;
    }
    let ns_key = if rt.namespaced() {
        ns.unwrap_or("")
    } else {
        ""
    };
    if state.get(res, ns_key, &name).is_some() {
        return Err(ApiError::already_exists(rt.group(), rt.plural(), &name));
    }
    strategy::admit(rt, &mut obj, None, state, cfg)?;
    Ok(obj)
}

/// Fills in and checks an update of `old` to `new` (PUT, or the result of a patch).
pub fn prepare_update(
    rt: &Served,
    old: &Value,
    new: Value,
    endpoint: Endpoint,
    state: &State,
    cfg: &AdmissionConfig,
) -> Result<Value, ApiError> {
    let mut new = object_meta::update(rt, old, new, endpoint)?;
    strategy::prepare(rt, &mut new, Some(old));
    if rt.keeps_generation() {
        object_meta::bump_generation(rt, old, &mut new);
    }
    strategy::defaults(rt, &mut new);
    // Mutating admission webhooks go here.
    let name = old
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    refuse_invalid(rt, name, object_causes(rt, &new, Some(old)))?;
    // Validating admission (policies, webhooks) goes here.
    strategy::admit(rt, &mut new, Some(old), state, cfg)?;
    Ok(new)
}

/// The object-meta rules every kind has, then the kind's own (`old` on update). CEL validation
/// rules go here.
fn object_causes(rt: &Served, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = crate::api::validation::object_meta(obj);
    causes.extend(strategy::causes(rt, obj, old));
    causes
}

/// The 422 of a write with validation causes.
fn refuse_invalid(rt: &Served, name: &str, causes: Vec<Cause>) -> Result<(), ApiError> {
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        strategy::invalid_group(rt),
        rt.kind(),
        name,
        causes,
    ))
}
