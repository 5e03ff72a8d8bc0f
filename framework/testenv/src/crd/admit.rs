//! What the server does to a custom resource before storing it: its version's structural schema
//! (prune, default, validate) and, with a status subresource, no status on create.

use serde_json::Value;

use crate::api::cel::compile::RuleTree;
use crate::api::status::Cause;
use crate::api::structural::Schema;
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

/// The 422 causes for a custom resource (`old`: the stored object, on an update).
pub fn validate(rt: &Served, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let Some(custom) = rt.custom() else {
        return Vec::new();
    };
    let Some(schema) = custom.schema.as_ref() else {
        return Vec::new();
    };
    schema_and_rules(schema, custom.rules.as_ref(), obj, old)
}

/// The causes of `obj` against a version's schema and rules, in the server's order: the schema's
/// (on an update, only those of values `old` did not already hold), then the rules'. As
/// upstream's custom resource strategy does, a type, required, enum, length or count error keeps
/// the rules from running (the object has not the shape they were written for), and one
/// fieldless cause says so.
pub fn schema_and_rules(
    schema: &Schema,
    rules: Option<&RuleTree>,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<Cause> {
    let mut causes = schema.validate_root(obj);
    if let Some(old) = old {
        causes = crate::crd::ratchet::keep_changed(schema, obj, old, causes);
    }
    let Some(rules) = rules else {
        return causes;
    };
    if causes.iter().any(|c| BLOCKING.contains(&c.reason)) {
        causes.push(Cause::invalid("<nil>", "\"null\"", RULES_NOT_CHECKED));
    } else {
        causes.extend(crate::api::cel::validate::validate(rules, schema, obj, old));
    }
    causes
}

/// The schema errors that keep the rules from running (upstream's `hasBlockingErr`).
const BLOCKING: [&str; 5] = [
    "FieldValueNotSupported",
    "FieldValueRequired",
    "FieldValueTooLong",
    "FieldValueTooMany",
    "FieldValueTypeInvalid",
];

const RULES_NOT_CHECKED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";
