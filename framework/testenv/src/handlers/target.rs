//! What a verb acts on and how: the addressed object ([`Target`]), the write options, and the
//! ownership (`managedFields`) a write records.

use serde_json::{Value, json};

use crate::admission::Endpoint;
use crate::api::kinds::{ResId, TABLE, lookup};
use crate::api::status::ApiError;
use crate::api::types::Served;
use crate::fields::{self, Ctx, Writer, set_managed_fields};
use crate::storage::store::State;

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
    pub(super) fn object(&self, ns: String, name: String) -> Target {
        Target {
            res: self.res,
            rt: self.rt.clone(),
            ns: Some(ns),
            name: Some(name),
            sub: None,
        }
    }

    pub(super) fn ns_key(&self) -> &str {
        if self.rt.namespaced() {
            self.ns.as_deref().unwrap_or("")
        } else {
            ""
        }
    }

    pub(super) fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    pub(super) fn endpoint(&self) -> Endpoint {
        if self.sub.as_deref() == Some("status") {
            Endpoint::Status
        } else {
            Endpoint::Main
        }
    }

    pub(super) fn not_found(&self) -> ApiError {
        ApiError::not_found(self.rt.group(), self.rt.plural(), self.name())
    }

    /// 404 when a CRD-defined type was retired after the request was routed.
    pub(super) fn check_served(&self, state: &State) -> Result<(), ApiError> {
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
    pub(super) fn writer<'a>(
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

    pub(super) fn fields_ctx(&self, creating: bool) -> Ctx<'_> {
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
pub(super) fn record_update(
    t: &Target,
    old: Option<&Value>,
    requested: Option<Value>,
    new: &mut Value,
    opts: &WriteOptions,
) {
    record_update_of(t, old, requested, new, None, opts)
}

/// `record_update`, with ownership computed on `tracked` when given (see
/// `admission::tracked_on_create`).
pub(super) fn record_update_of(
    t: &Target,
    old: Option<&Value>,
    requested: Option<Value>,
    new: &mut Value,
    tracked: Option<&Value>,
    opts: &WriteOptions,
) {
    let (api_version, now) = (t.rt.api_version(), crate::api::meta::now());
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

pub(super) fn requested_managed_fields(body: &Value) -> Option<Value> {
    body.pointer("/metadata/managedFields").cloned()
}
