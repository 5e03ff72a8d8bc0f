//! The Kubernetes cloud controllers, on the shared-cache controller manager.
//!
//! [`cloud`] holds the provider contract and its registry (the fake cloud is the `fake-cloud`
//! crate, so nothing here compiles it); the controllers
//! (`node`, `node_lifecycle`, `service`, `route`) each live in their own module and are registered
//! under the upstream canonical names and aliases. [`app`] runs them as a process: the stock
//! binary and distros that embed them share it.

pub mod app;
pub mod cloud;
pub mod compat_options;
pub mod configz;
pub mod context;
#[cfg(test)]
mod doc_tables;
pub mod event_sink;
mod initializers;
pub mod listers;
pub mod names;
pub mod node;
pub mod node_lifecycle;
pub mod node_parts;
pub mod options;
pub mod retry;
pub mod route;
pub mod service;
pub mod webhooks;
pub mod wiring;

pub use context::CloudContext;
pub use initializers::cloud_initializers;
