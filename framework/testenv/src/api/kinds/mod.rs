//! The built-in kinds, one file each (a file may hold the kinds of one API that share their
//! rules, as both Event APIs, RBAC's four or the review APIs do), and [`TABLE`], the list the
//! server serves, in discovery order. A kind's id ([`ResId`]) is its index here; CRD-defined
//! types follow (`api::types::Registry`).
//!
//! Adding a built-in kind: its file with its `Kind` value and its tests, and one line each
//! below (its `mod` and its place in [`TABLE`]); docs/architecture.md has the recipe.

mod admissionpolicy;
mod configmap;
mod customresourcedefinition;
mod endpoints;
mod event;
mod lease;
mod namespace;
mod node;
mod pod;
mod rbac;
mod registration;
mod reviews;
mod secret;
mod service;
mod serviceaccount;
mod webhookconfiguration;

pub use customresourcedefinition::storage_version;
pub use namespace::IMMORTAL_NAMESPACES;

use crate::api::kind::Kind;

/// Every served built-in kind.
pub static TABLE: &[Kind] = &[
    node::KIND,
    service::KIND,
    namespace::KIND,
    configmap::KIND,
    secret::KIND,
    endpoints::ENDPOINTS,
    event::CORE,
    pod::KIND,
    customresourcedefinition::KIND,
    lease::KIND,
    event::EVENTS,
    endpoints::ENDPOINT_SLICE,
    serviceaccount::KIND,
    reviews::TOKEN_REVIEW,
    reviews::SUBJECT_ACCESS_REVIEW,
    reviews::SELF_SUBJECT_ACCESS_REVIEW,
    reviews::LOCAL_SUBJECT_ACCESS_REVIEW,
    rbac::CLUSTER_ROLE,
    rbac::CLUSTER_ROLE_BINDING,
    rbac::ROLE,
    rbac::ROLE_BINDING,
    reviews::SELF_SUBJECT_RULES_REVIEW,
    webhookconfiguration::VALIDATING,
    webhookconfiguration::MUTATING,
    admissionpolicy::POLICY,
    admissionpolicy::BINDING,
];

/// Id of a served type: an index in [`TABLE`], or (from `TABLE.len()` on) a CRD-defined type in
/// `api::types::Registry`; the store keys objects by it.
pub type ResId = usize;

/// Finds a built-in type by group, version and plural (`api::types::Registry::lookup` also finds
/// the CRD-defined ones).
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<ResId> {
    TABLE
        .iter()
        .position(|k| k.ty.group == group && k.ty.version == version && k.ty.plural == plural)
}

#[cfg(test)]
mod tests;
