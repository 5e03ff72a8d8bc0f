//! What the server does to an object on its own before storing it, in the order `chain` lays
//! out: the object-meta rules every kind has (`object_meta`), the kind's own steps (`strategy`:
//! a built-in kind's defaults, validation and cluster step, a custom resource's schema),
//! NamespaceLifecycle (`namespace`), and what a write may not change of the stored object
//! (`write_checks`).

mod chain;
mod namespace;
mod object_meta;
mod strategy;
pub mod write_checks;

pub use chain::{prepare_create, prepare_update};
pub use object_meta::Endpoint;
pub use strategy::tracked_on_create;
