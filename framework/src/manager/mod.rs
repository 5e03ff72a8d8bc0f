//! The manager: the initializer map, `--controllers` selection, and the run loop that ties the
//! shared cache, the queues, leader election and the admin server together.
//!
//! Start order (as kube-controller-manager): parse the selection (every error at once) → serve
//! health/metrics → win the Lease (if enabled) → run each selected initializer, which registers
//! informers and handlers → start the informer factory → wait for every cache → start the workers →
//! on shutdown, drain in-flight reconciles up to a deadline.

mod config;
mod context;
mod initializers;
mod run;
mod selection;
mod signals;

pub use config::ManagerConfig;
pub use context::InitContext;
pub use initializers::{
    InitError, InitFn, InitOutcome, Initializer, Initializers, InitializersError,
};
pub use run::{Manager, ManagerError, StartHook};
pub use selection::*;
pub use signals::shutdown_on_signals;

#[cfg(test)]
mod start_hook_tests;
