//! What kube-apiserver fills in on its own per built-in kind, and which of it the writer of a
//! create does not own (upstream tracks fields before its admission plugins run, so what they
//! add belongs to nobody).

mod endpoints;
mod event;
mod pod;
mod secret;

use serde_json::Value;

use crate::api::status::Cause;
use crate::api::types::Served;

/// Defaults and conversions of a built-in kind on every write (create, update, patch result).
pub fn apply(rt: &Served, obj: &mut Value) {
    if rt.custom().is_some() {
        return;
    }
    match (rt.group(), rt.kind()) {
        ("", "Secret") => secret::default(obj),
        ("", "Pod") => pod::default(obj),
        ("", "Endpoints") => endpoints::default_endpoints(obj),
        ("discovery.k8s.io", "EndpointSlice") => endpoints::default_slice(obj),
        // A struct, never omitted: `spec: {}` (defaults-lease-empty.txt).
        ("coordination.k8s.io", "Lease") => {
            if let Some(m) = obj.as_object_mut() {
                m.entry("spec").or_insert(serde_json::json!({}));
            }
        }
        (g @ ("" | "events.k8s.io"), "Event") => event::default(g, obj),
        _ => {}
    }
}

/// What the create-time admission plugins add (before validation).
pub fn admit_create(rt: &Served, obj: &mut Value) {
    if rt.custom().is_none() && rt.group().is_empty() && rt.kind() == "Pod" {
        pod::admit_create(obj);
    }
}

/// The kind's own validation of a defaulted object.
pub fn causes(rt: &Served, obj: &Value) -> Vec<Cause> {
    match (rt.custom(), rt.group(), rt.kind()) {
        (None, "", "Secret") => secret::causes(obj),
        _ => Vec::new(),
    }
}

/// The object a create's field ownership is computed on: `admitted` without what admission
/// plugins added that the request (`sent`) did not carry (a Node's `not-ready` taint from
/// TaintNodesByCondition).
pub fn tracked_on_create(rt: &Served, sent: &Value, admitted: &Value) -> Option<Value> {
    if rt.custom().is_some() {
        return None;
    }
    // Zero values are in the empty object the field manager compares with, so nobody owns them.
    let zeros: Vec<&str> = match (rt.group(), rt.kind()) {
        (g @ ("" | "events.k8s.io"), "Event") => {
            event::zero_fields(g).into_iter().map(|(p, _)| p).collect()
        }
        ("coordination.k8s.io", "Lease") => vec!["/spec"],
        _ => Vec::new(),
    };
    let plugin_fields: &[&str] = match (rt.group(), rt.kind()) {
        ("", "Node") => &["/spec/taints"],
        // Set by the namespace strategy after the field manager ran.
        ("", "Namespace") => &["/spec/finalizers"],
        ("", "Pod") => {
            let mut view = admitted.clone();
            pod::untrack(sent, &mut view);
            return Some(view);
        }
        _ if !zeros.is_empty() => &[],
        _ => return None,
    };
    let mut view = admitted.clone();
    for ptr in plugin_fields.iter().chain(zeros.iter()) {
        if sent.pointer(ptr).is_none()
            && let Some((parent, key)) = ptr.rsplit_once('/')
            && let Some(Value::Object(m)) = view.pointer_mut(parent)
        {
            m.remove(key);
            if m.is_empty()
                && sent.pointer(parent).is_none()
                && let Some((grand, last)) = parent.rsplit_once('/')
                && let Some(Value::Object(g)) = view.pointer_mut(grand)
            {
                g.remove(last);
            }
        }
    }
    Some(view)
}
