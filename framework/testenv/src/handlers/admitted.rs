//! The writes a client asks for, through the admission chain (`admission::chain`): creates,
//! updates, patches and applies (`object_write`; through a converted custom resource version,
//! `converted`), and deletes, whose webhooks see the stored object as `oldObject`; the `async`
//! functions the router calls.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::delete::{self, DeleteOptions};
use super::object_write::{ObjectWrite, Verb, attributes};
use super::target::{Target, WriteOptions};
use crate::admission::chain::{self, Outcome, Write};
use crate::admission::webhooks::{Objects, Request, Requester};
use crate::api::cluster::AdmissionConfig;
use crate::api::status::ApiError;
use crate::crd::{self, conversion};
use crate::storage::store::{State, Store, rv_of};

/// One create, update, patch or apply, from its request to its answer.
pub async fn write_object(
    store: &Store,
    cfg: &AdmissionConfig,
    t: &Target,
    verb: Verb<'_>,
    opts: &WriteOptions,
    user: &Requester,
) -> Outcome {
    let converter = match t.sub.as_deref() {
        Some("scale") => None,
        _ => store.with(|s| conversion::needed(s, &t.rt)),
    };
    if let Some(converter) = converter {
        return super::converted::write_object(store, cfg, t, verb, opts, user, &converter).await;
    }
    let w = ObjectWrite {
        cfg,
        t,
        verb,
        opts,
        user,
        view: None,
        held: None,
    };
    chain::run(store, &w).await
}

/// One DELETE (`body`: its DeleteOptions as sent, maybe empty), from request to answer.
pub async fn delete_object(
    store: &Store,
    t: &Target,
    opts: &DeleteOptions,
    body: &[u8],
    user: &Requester,
) -> Outcome {
    let w = DeleteWrite {
        t,
        opts,
        options: delete_options(body, opts.dry_run),
        user,
    };
    chain::run(store, &w).await
}

struct DeleteWrite<'a> {
    t: &'a Target,
    opts: &'a DeleteOptions,
    options: Value,
    user: &'a Requester,
}

impl Write for DeleteWrite<'_> {
    type Staged = ();
    /// The object deleted.
    type Prepared = Arc<Value>;

    fn stage(&self, _: &mut State) -> Result<(Self::Staged, Request, Objects), ApiError> {
        // Upstream's delete handler runs mutating admission before it reads the object: those
        // webhooks see neither object.
        let name = self.t.name.clone().unwrap_or_default();
        let req = attributes(
            self.t,
            "DELETE",
            name,
            false,
            self.user,
            self.opts.dry_run,
            self.options.clone(),
        );
        Ok(((), req, Objects::default()))
    }

    fn redefault(&self, _: &mut Value) -> Result<(), String> {
        Ok(())
    }

    fn prepare(
        &self,
        state: &mut State,
        _: (),
        _: Option<Value>,
    ) -> Result<(Self::Prepared, Objects), ApiError> {
        let old = delete::precheck(state, self.t, self.opts)?;
        let objects = Objects {
            object: None,
            old: Some(crd::to_version(&self.t.rt, (*old).clone())),
        };
        Ok((old, objects))
    }

    fn commit(&self, state: &mut State, old: Arc<Value>) -> Result<Option<(u16, Value)>, ApiError> {
        let current = state.get(self.t.res, self.t.ns_key(), self.t.name());
        if current.map(|c| rv_of(c)) != Some(rv_of(&old)) {
            return Ok(None);
        }
        delete::delete(state, self.t, self.opts).map(Some)
    }
}

/// The DeleteOptions a review carries: the body's known fields (Go re-encodes its struct) and
/// a query's `dryRun`.
fn delete_options(body: &[u8], dry_run: bool) -> Value {
    let sent: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let mut o = Map::new();
    o.insert("kind".into(), "DeleteOptions".into());
    o.insert("apiVersion".into(), "meta.k8s.io/v1".into());
    for k in [
        "gracePeriodSeconds",
        "preconditions",
        "orphanDependents",
        "propagationPolicy",
        "dryRun",
    ] {
        if let Some(v) = sent.get(k).filter(|v| !v.is_null()) {
            o.insert(k.into(), v.clone());
        }
    }
    if dry_run && !o.contains_key("dryRun") {
        o.insert("dryRun".into(), json!(["All"]));
    }
    Value::Object(o)
}
