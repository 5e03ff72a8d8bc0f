//! CustomResourceDefinitions, as kube-apiserver's apiextensions-apiserver serves them: what
//! happens when one is created, changed or deleted (`lifecycle`: `NamesAccepted` /
//! `Established`, the types it registers in `api::types::Registry`, the cleanup of its objects),
//! and what the server does with the custom resources themselves: their structural schema
//! applied (`admit`, its errors ratcheted on update in `ratchet`; the schema itself, pruning,
//! defaulting and validation, is `api::structural`), the `scale` subresource (`scale`) and
//! printer columns (`columns`); the same, without a server, for fixtures (`fixture`). The
//! CRD kind's own defaults and validation (its CEL rules refused too) are its kind's
//! (`api::kinds`); the rules a stored CRD's custom resources must keep are compiled in
//! `lifecycle`.
//!
//! Everything runs synchronously under the store lock: a CRD is established in the write that
//! creates it (its watchers see ADDED, then MODIFIED with the conditions), and a deleted CRD's
//! objects are gone when the DELETE returns, where upstream's controllers take a moment.

pub mod admit;
pub mod columns;
pub mod conversion;
pub mod fixture;
pub mod lifecycle;
pub mod ratchet;
pub mod scale;

use serde_json::{Map, Value};

use crate::api::types::Served;

/// The fields of ObjectMeta; anything else under `metadata` is dropped on decode, as upstream's
/// typed decoding drops it.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Drops unknown `metadata` fields.
pub fn prune_object_meta(meta: &mut Map<String, Value>) {
    meta.retain(|k, _| OBJECT_META_FIELDS.contains(&k.as_str()));
}

/// A custom resource as stored: at its CRD's storage version.
pub fn to_storage(rt: &Served, mut obj: Value) -> Value {
    if let Served::Custom(c) = rt
        && obj.is_object()
    {
        obj["apiVersion"] = format!("{}/{}", c.group, c.storage_version).into();
    }
    obj
}

/// A stored custom resource as the requested version shows it (conversion `None`: only
/// `apiVersion` changes).
pub fn to_version(rt: &Served, mut obj: Value) -> Value {
    if let Served::Custom(_) = rt
        && obj.is_object()
    {
        obj["apiVersion"] = rt.api_version().into();
    }
    obj
}
