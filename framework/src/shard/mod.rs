//! Sharded controllers: one controller on every replica at once, each replica reconciling only the
//! keys assigned to it, never one key on two replicas at the same time, coordinated through one
//! Lease per replica and nothing else (docs/architecture.md, "Sharded controllers").
//!
//! - `ring`: consistent-hash assignment of keys to members ([`View`]).
//! - `membership`: the member's own Lease and the live set, judged on the local clock.
//! - `handover`: the admission gate and the drain/ack protocol ([`Ring`]).
//! - `metrics`: per-ring metrics and the health check.

mod ring;

pub use ring::{DEFAULT_VNODES, View, stable_hash};
