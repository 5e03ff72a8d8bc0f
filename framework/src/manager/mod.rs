//! The manager: the initializer map, `--controllers` selection, and the run loop that ties the
//! shared cache, the queues, leader election and the admin server together.
//!
//! Start order (as kube-controller-manager): parse the selection (every error at once) → serve
//! health/metrics → win the Lease (if enabled) → run each selected initializer, which registers
//! informers and handlers → start the informer factory → wait for every cache → start the workers →
//! on shutdown, drain in-flight reconciles up to a deadline. A warm standby
//! ([`ManagerConfig::warm_standby`]) registers and syncs before campaigning and, on winning the
//! Lease, runs the start hook and starts the workers from the synced cache. Sharded controllers
//! ([`ManagerConfig::sharded_controllers`]) take the same warm order and start on every replica
//! without the Lease (`warm.rs`).
//!
//! Any failure on the way (an initializer, the start hook, the cache-sync timeout) and any
//! controller whose task ends or panics while running ends `run` with that error and gives up
//! leadership; lost leadership drops in-flight work instead of draining it. Upstream's process
//! dies in each case; a replica must never hold the Lease while doing nothing.

mod config;
mod context;
mod initializers;
mod phases;
mod run;
mod selection;
mod signals;
mod warm;

pub use config::{DEFAULT_EVENT_FLUSH_TIMEOUT, ManagerConfig};
pub use context::InitContext;
pub use initializers::{
    InitError, InitFn, InitOutcome, Initializer, Initializers, InitializersError, ValidateFn,
};
pub use run::{Manager, ManagerError, StartHook};
pub use selection::*;
pub use signals::shutdown_on_signals;

#[cfg(test)]
mod start_hook_tests;
