//! What the server does to a custom resource before storing it: its version's structural schema
//! (prune, default, validate) and, with a status subresource, no status on create.

use serde_json::Value;

use crate::api::status::Cause;
use crate::api::types::Served;

/// A new custom resource: with a status subresource, create cannot set status (upstream's
/// custom resource strategy drops it).
pub fn prepare_create_custom(rt: &Served, obj: &mut Value) {
    if rt.status_subresource()
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    apply_schema(rt, obj);
}

/// Prunes unknown fields and applies defaults from the version's structural schema.
pub fn apply_schema(rt: &Served, obj: &mut Value) {
    if let Some(schema) = rt.custom().and_then(|c| c.schema.as_ref()) {
        schema.prune_root(obj);
        schema.apply_defaults(obj);
    }
}

/// The 422 causes for a custom resource, in the server's order: its schema's, then its CEL
/// rules' (`old`: the stored object, on an update, whose unchanged values are ratcheted).
pub fn validate(rt: &Served, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let Some(custom) = rt.custom() else {
        return Vec::new();
    };
    let Some(schema) = custom.schema.as_ref() else {
        return Vec::new();
    };
    let mut causes = schema.validate_root(obj);
    if let Some(old) = old {
        causes = crate::crd::ratchet::keep_changed(schema, obj, old, causes);
    }
    if let Some(rules) = &custom.rules {
        causes.extend(crate::api::cel::validate::validate(rules, schema, obj, old));
    }
    causes
}
