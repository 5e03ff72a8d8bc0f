//! Lease (`coordination.k8s.io/v1`, namespaced): its `spec` is a struct, never omitted (and so
//! owned by nobody when the writer did not send it), upstream's `ValidateLeaseSpec`, and the
//! holder kubectl shows.

use k8s_openapi::api::coordination::v1 as openapi;
use k8s_pb::api::coordination::v1 as pb;
use serde_json::{Value, json};

use crate::api::kind::{
    Admission, Column, Kind, Lifecycle, NameRule, Names, Printer, Protobuf, Rest, Shape, Type,
    untrack_unsent,
};
use crate::api::printing::{age, row, text};
use crate::api::status::Cause;

/// Lease.
pub const KIND: Kind = Kind {
    ty: Type::of::<openapi::Lease>(),
    names: Names {
        singular: "lease",
        short: &[],
        categories: &[],
    },
    rest: Rest::PLAIN,
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::Subdomain,
    field_selectors: &[],
    patch_lists: &[],
    admission: Admission {
        defaults: Some(default),
        validate: Some(validate),
        untracked: Some(untracked),
        ..Admission::NONE
    },
    printer: Printer {
        columns: &[
            Column::text("Name"),
            Column::text("Holder"),
            Column::text("Age"),
        ],
        cells,
    },
    protobuf: Protobuf::of::<pb::Lease, pb::LeaseList>(),
    apply: Shape::NONE,
};

/// A struct, never omitted: `spec: {}` (defaults-lease-empty.txt).
fn default(obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        m.entry("spec").or_insert(json!({}));
    }
}

/// The defaulted `spec: {}` is the zero value, which nobody owns.
fn untracked(sent: &Value, view: &mut Value) {
    untrack_unsent(sent, view, &["/spec"]);
}

/// Upstream `ValidateLeaseSpec`: positive duration, non-negative transitions.
fn validate(obj: &Value, _old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(d) = obj
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64)
        && d <= 0
    {
        causes.push(Cause::invalid(
            "spec.leaseDurationSeconds",
            &d.to_string(),
            "must be greater than 0",
        ));
    }
    if let Some(t) = obj
        .pointer("/spec/leaseTransitions")
        .and_then(Value::as_i64)
        && t < 0
    {
        causes.push(Cause::invalid(
            "spec.leaseTransitions",
            &t.to_string(),
            "must be greater than or equal to 0",
        ));
    }
    causes
}

fn cells(obj: &Value) -> Vec<Value> {
    row(
        obj,
        vec![text(obj, "/spec/holderIdentity").into(), age(obj).into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_rules() {
        assert!(
            validate(
                &json!({"spec": {"leaseDurationSeconds": 15, "leaseTransitions": 0}}),
                None
            )
            .is_empty()
        );
        let fields: Vec<String> = validate(
            &json!({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}}),
            None,
        )
        .into_iter()
        .map(|c| c.field)
        .collect();
        assert_eq!(
            fields,
            ["spec.leaseDurationSeconds", "spec.leaseTransitions"]
        );
    }
}
