//! Field ownership and server-side apply, as kube-apiserver's field manager does them: every
//! write records who set which fields in `metadata.managedFields`, and an apply
//! (`application/apply-patch+yaml`) merges a partial object by the type's shape, removes the
//! fields its manager stopped sending, and refuses (409) to change another manager's fields
//! unless forced.
//!
//! - `set`: field paths and their FieldsV1 form;
//! - `shape`: list and map kinds per type and path (from a kind's list strategies and shape);
//! - `walk`: field sets, comparisons, merges and removals over JSON objects;
//! - `managed`: the entries, and ownership after an update or an apply.

mod managed;
mod set;
mod shape;
mod walk;

pub use managed::{Writer, after_update, apply};
pub use walk::Ctx;

use serde_json::Value;

use crate::api::types::Served;

/// Records a write the server makes on its own (the CRD controllers' status updates) under
/// `manager`, as kube-apiserver's own controllers write through its field manager.
pub fn record_server_write(
    rt: &Served,
    old: &Value,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
) {
    let (api_version, now) = (rt.api_version(), crate::api::meta::now());
    let ctx = Ctx {
        rt,
        subresource,
        creating: false,
    };
    let w = Writer {
        manager,
        api_version: &api_version,
        subresource,
        now: &now,
    };
    set_managed_fields(new, after_update(ctx, old, new, None, w));
}

/// Stores `managed` as the object's `metadata.managedFields` (removing it when `None`).
pub fn set_managed_fields(obj: &mut Value, managed: Option<Value>) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        match managed {
            Some(m) => meta.insert("managedFields".into(), m),
            None => meta.remove("managedFields"),
        };
    }
}

/// The field manager of a write that names none: the first segment of its user agent, as
/// upstream derives it (`kubectl/v1.32.4 (linux/amd64) ...` manages as `kubectl`).
pub fn default_manager(user_agent: Option<&str>) -> String {
    let ua = user_agent.unwrap_or("");
    let first = ua.split('/').next().unwrap_or("");
    first.chars().take(128).collect()
}
