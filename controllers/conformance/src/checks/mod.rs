//! The checks: one per rule the controllers rely on, grouped by facet, and the small vocabulary
//! they are written in (call a provider method, compare, fail saying what came back).

mod instances;
mod instances_v2;
mod load_balancer;
mod provider;
mod routes;
mod vocabulary;

pub use vocabulary::{Check, Facet};

/// Every check, in the order [`crate::run`] runs them.
pub fn all() -> impl Iterator<Item = &'static Check> {
    [
        provider::CHECKS,
        instances_v2::CHECKS,
        instances::CHECKS,
        load_balancer::CHECKS,
        routes::CHECKS,
    ]
    .into_iter()
    .flatten()
}
