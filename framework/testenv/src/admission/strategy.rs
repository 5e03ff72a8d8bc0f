//! A write's steps that are its kind's own: for a built-in kind its `api::kind::Admission`
//! (upstream's REST strategy and the admission plugins particular to it), for a custom
//! resource its CRD version's structural schema (`crd::admit`).

use serde_json::Value;

use crate::api::cluster::{AdmissionConfig, Cluster};
use crate::api::status::{ApiError, Cause};
use crate::api::types::Served;
use crate::storage::store::State;

/// The strategy's PrepareForCreate / PrepareForUpdate (`old` on update): for a custom resource,
/// its schema's pruning and defaults (and on create, with a status subresource, no status).
pub(super) fn prepare(rt: &Served, obj: &mut Value, old: Option<&Value>) {
    match (rt, old) {
        (Served::Builtin(k), _) => {
            if let Some(prepare) = k.admission.prepare {
                prepare(obj, old);
            }
        }
        (Served::Custom(_), None) => crate::crd::admit::prepare_create_custom(rt, obj),
        (Served::Custom(_), Some(_)) => crate::crd::admit::apply_schema(rt, obj),
    }
}

/// The kind's defaults, on every write.
pub(super) fn defaults(rt: &Served, obj: &mut Value) {
    if let Some(defaults) = rt.builtin().and_then(|k| k.admission.defaults) {
        defaults(obj);
    }
}

/// The create-time admission plugins of the kind.
pub(super) fn on_create(rt: &Served, obj: &mut Value) {
    if let Some(on_create) = rt.builtin().and_then(|k| k.admission.on_create) {
        on_create(obj);
    }
}

/// The kind's own validation (`old` on update), or the custom resource's schema's and rules'.
pub(super) fn causes(rt: &Served, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    match rt {
        Served::Builtin(k) => k
            .admission
            .validate
            .map(|validate| validate(obj, old))
            .unwrap_or_default(),
        Served::Custom(_) => crate::crd::admit::validate(rt, obj, old),
    }
}

/// The group a 422 names: the kind's own, or the one its admission says it is validated as.
pub(super) fn invalid_group(rt: &Served) -> &str {
    match rt.builtin().and_then(|k| k.admission.invalid_as) {
        Some(group) => group,
        None => rt.group(),
    }
}

/// The kind's step after validation, with the cluster it may consult.
pub(super) fn admit(
    rt: &Served,
    obj: &mut Value,
    old: Option<&Value>,
    state: &State,
    cfg: &AdmissionConfig,
) -> Result<(), ApiError> {
    let Some(admit) = rt.builtin().and_then(|k| k.admission.admit) else {
        return Ok(());
    };
    let cluster = Cluster {
        config: cfg,
        allocated: state.allocations(),
    };
    admit(obj, old, &cluster)
}

/// The object a create's field ownership is computed on: `admitted` without what admission
/// added that the request (`sent`) did not carry (a Node's `not-ready` taint from
/// TaintNodesByCondition), as the kind says; `None` when the kind keeps it all.
pub fn tracked_on_create(rt: &Served, sent: &Value, admitted: &Value) -> Option<Value> {
    let untracked = rt.builtin()?.admission.untracked?;
    let mut view = admitted.clone();
    untracked(sent, &mut view);
    Some(view)
}
