//! An embeddable Kubernetes controller manager.
//!
//! Every controller registered in one process shares a single watch cache per resource type
//! ([`informer`]), is fed by a client-go-semantics work queue ([`workqueue`]) and is an ordinary
//! `tower::Service` ([`controller`]). The [`manager`] selects controllers by name the way
//! kube-controller-manager's `--controllers` flag does, starts the shared cache once every
//! controller has registered, and runs the workers until shutdown. [`builder`] wires a
//! controller (primary kind, owned and watched kinds, predicates) in one expression over those
//! pieces, and [`object`] holds what custom-resource reconciles repeat (finalizers, status,
//! conditions).
//!
//! [`testing`] (feature `testing`) runs a manager against kube-testenv in tests.
//!
//! The framework knows Kubernetes and nothing of clouds: cloud controllers live in their own crate.

pub mod admin;
pub mod builder;
pub mod client;
pub mod config_file;
pub mod controller;
pub mod events;
pub mod files;
pub mod informer;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod object;
pub mod options;
pub mod panic_guard;
pub mod profiling;
pub mod serving;
pub mod shard;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod workqueue;
