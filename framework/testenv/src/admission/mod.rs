//! What the server does to an object on its own before storing it, in the order `chain` lays
//! out: the object-meta rules every kind has (`object_meta`), the kind's own steps (`strategy`:
//! a built-in kind's defaults, validation and cluster step, a custom resource's schema),
//! NamespaceLifecycle (`namespace`), the `ValidatingAdmissionPolicy`s it runs (`policies`), the
//! admission webhooks it calls (`webhooks`), and what a
//! write may not change of the stored object (`write_checks`).

pub mod chain;
mod namespace;
mod object_meta;
pub mod policies;
mod strategy;
pub mod webhooks;
pub mod write_checks;

pub use namespace::check_open as check_namespace_open;
pub use object_meta::Endpoint;
pub use strategy::tracked_on_create;
