//! The steps of one write, in order, in one place. Every create and update (POST, PUT, each
//! patch's result, server-side apply) goes through them before the store takes it; the first
//! step that refuses answers the request.
//!
//! 0. **Mutating admission webhooks** (`webhooks::mutation`), on the object as decoded (the
//!    kind's decode-time defaults, a custom resource pruned and defaulted), before any of the
//!    server's own steps: the review's object has no uid, namespace or creationTimestamp yet
//!    (wh-mutating-patch.txt), and what the webhooks change belongs to no field manager.
//!    Configurations in name order, webhooks in list order, with reinvocation.
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
//! 4. The kind's step against the cluster (`strategy`): a Service's addresses allocated or kept,
//!    a new Node's not-ready taint, a new Namespace's finalizer; a Node's immutable fields. It
//!    comes before the validating admission, as upstream's generic store runs a kind's
//!    `BeginCreate` / `BeginUpdate` (where the Service REST storage allocates its clusterIP and
//!    nodePorts) and the strategy before the validating admission it is handed: a validating
//!    webhook sees a Service's allocated clusterIP and nodePorts, a mutating one does not.
//! 5. **`ValidatingAdmissionPolicy`** (`policies`), under the lock, on the object steps 1 to 4
//!    made, then the **validating admission webhooks** (`webhooks::validation`), all at once
//!    (wh-mutating-then-validating.txt): kube-apiserver's plugin order runs the policies before
//!    the webhooks, so a policy's refusal means no webhook is called.
//! 6. Storage preconditions, on create: the namespace is open (`namespace`: 404, 403) and the
//!    name is free (409) (on update the handler has found the object); then step 4 checked
//!    again against the cluster as it is now: upstream holds what it allocated in the
//!    allocator until the write ends, here another write may have taken an address while the
//!    webhooks were called, and the write starts again (see [`run`]).
//!
//! [`prepare_create`] and [`prepare_update`] are steps 1 to 3, [`cluster_step`] step 4,
//! [`admit_create`] and [`admit_update`] step 6. The webhooks are called with no store lock
//! held: [`run`] takes a write ([`Write`], implemented where the verbs live, `handlers`) through
//! the steps, taking the lock for 1 to 4 and again for 6 and storage, and starts again from the
//! stored object when it changed in between, as upstream's `GuaranteedUpdate` retries, so a
//! webhook never approves an object other than the one stored. A write no webhook matches runs
//! every step in one hold of the lock. Every webhook's warnings go back with the answer, a
//! refusal's too. docs/webhooks.md has the order.

use serde_json::Value;

use super::object_meta::{self, Endpoint};
use super::webhooks::config::{self, Phase};
use super::webhooks::{Objects, Request, matching, mutation, validation};
use super::{namespace, policies, strategy};
use crate::api::cluster::AdmissionConfig;
use crate::api::kinds::ResId;
use crate::api::status::{ApiError, Cause};
use crate::api::types::Served;
use crate::storage::store::{State, Store};

/// Steps 1 to 3 of a create; `ns` is the namespace from the URL.
pub fn prepare_create(rt: &Served, ns: Option<&str>, obj: Value) -> Result<Value, ApiError> {
    let (mut obj, name) = object_meta::create(rt, ns, obj)?;
    strategy::prepare(rt, &mut obj, None);
    strategy::defaults(rt, &mut obj);
    strategy::on_create(rt, &mut obj);
    let mut causes = object_meta::name_causes(rt.name_rule(), &name);
    causes.extend(object_causes(rt, &obj, None));
    refuse_invalid(rt, &name, causes)?;
    Ok(obj)
}

/// Step 4 of a create (`old` none) or an update: the kind's step against the cluster.
pub fn cluster_step(
    rt: &Served,
    obj: &mut Value,
    old: Option<&Value>,
    state: &State,
    cfg: &AdmissionConfig,
) -> Result<(), ApiError> {
    strategy::admit(rt, obj, old, state, cfg)
}

/// Step 6 of a create, on the object steps 1 to 4 made; `None` when what step 4 allocated was
/// taken since.
pub fn admit_create(
    rt: &Served,
    res: ResId,
    ns: Option<&str>,
    obj: Value,
    state: &State,
    cfg: &AdmissionConfig,
) -> Result<Option<Value>, ApiError> {
    if let Some(ns) = ns.filter(|_| rt.namespaced()) {
        namespace::check_open(state, ns)?;
    }
    let ns_key = if rt.namespaced() {
        ns.unwrap_or("")
    } else {
        ""
    };
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if state.get(res, ns_key, name).is_some() {
        return Err(ApiError::already_exists(rt.group(), rt.plural(), name));
    }
    Ok(still_admitted(rt, obj, None, state, cfg))
}

/// Steps 1 to 3 of an update of `old` to `new` (PUT, or the result of a patch).
pub fn prepare_update(
    rt: &Served,
    old: &Value,
    new: Value,
    endpoint: Endpoint,
) -> Result<Value, ApiError> {
    let mut new = object_meta::update(rt, old, new, endpoint)?;
    strategy::prepare(rt, &mut new, Some(old));
    if rt.keeps_generation() {
        object_meta::bump_generation(rt, old, &mut new);
    }
    strategy::defaults(rt, &mut new);
    let name = old
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    refuse_invalid(rt, name, object_causes(rt, &new, Some(old)))?;
    Ok(new)
}

/// Step 6 of an update, on the object steps 1 to 4 made; `None` when what step 4 allocated was
/// taken since.
pub fn admit_update(
    rt: &Served,
    old: &Value,
    new: Value,
    state: &State,
    cfg: &AdmissionConfig,
) -> Option<Value> {
    still_admitted(rt, new, Some(old), state, cfg)
}

/// Step 4 again on its own result, against the cluster as it is now: it passed before, so a
/// refusal now (an address another write took meanwhile) means the write must start again.
fn still_admitted(
    rt: &Served,
    mut obj: Value,
    old: Option<&Value>,
    state: &State,
    cfg: &AdmissionConfig,
) -> Option<Value> {
    strategy::admit(rt, &mut obj, old, state, cfg).ok()?;
    Some(obj)
}

/// What the server does to an object when it decodes one, before step 0 and again after each
/// mutating webhook's patch: a built-in kind's defaults, a custom resource pruned and
/// defaulted; an object its Go type cannot hold is the error.
pub fn decoded(rt: &Served, object: &mut Value) -> Result<(), String> {
    if rt.custom().is_some() {
        crate::crd::admit::apply_schema(rt, object);
        return Ok(());
    }
    if let Some(e) = crate::api::decoding::type_error(rt, object) {
        return Err(e);
    }
    strategy::defaults(rt, object);
    Ok(())
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

/// How many times a write starts again because the stored object changed under it.
const ATTEMPTS: usize = 10;

/// One verb's steps under the store lock.
pub trait Write: Sync {
    /// What [`Write::stage`] hands to [`Write::prepare`].
    type Staged: Send;
    /// What [`Write::prepare`] hands to [`Write::commit`].
    type Prepared: Send;

    /// Up to step 0: the write taken up to admission, what webhooks are told, and the objects
    /// as the mutating webhooks see them.
    fn stage(&self, state: &mut State) -> Result<(Self::Staged, Request, Objects), ApiError>;

    /// A patched object's decode-time defaults (see [`decoded`]).
    fn redefault(&self, object: &mut Value) -> Result<(), String>;

    /// Steps 1 to 4: the object the mutating webhooks left (`None`: none was called) prepared,
    /// validated and taken through the kind's cluster step, and the objects as the validating
    /// webhooks see them.
    fn prepare(
        &self,
        state: &mut State,
        staged: Self::Staged,
        mutated: Option<Value>,
    ) -> Result<(Self::Prepared, Objects), ApiError>;

    /// Step 6 and storage: the answer, or `None` when the stored object changed since the write
    /// was staged, or what step 4 allocated was taken.
    fn commit(
        &self,
        state: &mut State,
        prepared: Self::Prepared,
    ) -> Result<Option<(u16, Value)>, ApiError>;
}

/// A write's answer and every webhook's warnings.
#[derive(Debug)]
pub struct Outcome {
    /// The status code and object, or the error.
    pub result: Result<(u16, Value), ApiError>,
    /// `Warning` headers to send, in order.
    pub warnings: Vec<String>,
}

/// What the first hold of the lock left to do.
enum First<W: Write> {
    Prepared(Next<W>),
    Mutate(Box<(W::Staged, Request, Objects, Vec<config::Hook>)>),
}

/// What preparing left to do.
enum Next<W: Write> {
    Done(Option<(u16, Value)>),
    Validate(Box<(W::Prepared, Request, Objects, Vec<matching::Invocation>)>),
}

/// Runs `w` through the steps against `store`.
pub async fn run<W: Write>(store: &Store, w: &W) -> Outcome {
    let mut warnings = Vec::new();
    for _ in 0..ATTEMPTS {
        let result = match attempt(store, w, &mut warnings).await {
            Ok(None) => continue,
            Ok(Some(answer)) => Ok(answer),
            Err(e) => Err(e),
        };
        return Outcome { result, warnings };
    }
    let busy = ApiError::internal("the object kept changing while admission webhooks were called");
    Outcome {
        result: Err(busy),
        warnings,
    }
}

/// One pass through the steps; `None` when the write must start again.
async fn attempt<W: Write>(
    store: &Store,
    w: &W,
    warnings: &mut Vec<String>,
) -> Result<Option<(u16, Value)>, ApiError> {
    let first = store.with(|s| -> Result<First<W>, ApiError> {
        let (staged, req, objects) = w.stage(s)?;
        let hooks = match req.exempt() {
            true => Vec::new(),
            false => config::load(s, Phase::Mutating),
        };
        if matching::invocations(s, &hooks, &req, &objects)?.is_empty() {
            return prepare(s, w, staged, req, None, warnings).map(First::Prepared);
        }
        Ok(First::Mutate(Box::new((staged, req, objects, hooks))))
    })?;
    let next = match first {
        First::Mutate(first) => {
            let (staged, req, objects, hooks) = *first;
            let redefault = |o: &mut Value| w.redefault(o);
            let m = mutation::run(store, &hooks, &req, objects, &redefault).await;
            warnings.extend(m.warnings);
            if let Some(e) = m.refusal {
                return Err(e);
            }
            store.with(|s| prepare(s, w, staged, req, m.objects.object, warnings))?
        }
        First::Prepared(next) => next,
    };
    match next {
        Next::Done(answer) => Ok(answer),
        Next::Validate(next) => {
            let (prepared, req, objects, invocations) = *next;
            let said = validation::run(&invocations, &req, &objects).await;
            warnings.extend(said.warnings);
            if let Some(e) = said.refusal {
                return Err(e);
            }
            store.with(|s| w.commit(s, prepared))
        }
    }
}

/// Steps 1 to 4 and the policies, then 6 in the same hold of the lock when no validating
/// webhook matches.
fn prepare<W: Write>(
    s: &mut State,
    w: &W,
    staged: W::Staged,
    req: Request,
    mutated: Option<Value>,
    warnings: &mut Vec<String>,
) -> Result<Next<W>, ApiError> {
    let (prepared, objects) = w.prepare(s, staged, mutated)?;
    let said = policies::run(s, &req, &objects);
    warnings.extend(said.warnings);
    if let Some(e) = said.refusal {
        return Err(e);
    }
    let hooks = match req.exempt() {
        true => Vec::new(),
        false => config::load(s, Phase::Validating),
    };
    let invocations = matching::invocations(s, &hooks, &req, &objects)?;
    if invocations.is_empty() {
        return Ok(Next::Done(w.commit(s, prepared)?));
    }
    Ok(Next::Validate(Box::new((
        prepared,
        req,
        objects,
        invocations,
    ))))
}
