//! Sharded controllers: one controller on every replica at once, each replica reconciling only the
//! keys assigned to it, never one key on two replicas at the same time, coordinated through one
//! Lease per replica and nothing else (docs/architecture.md, "Sharded controllers").
//!
//! - `ring`: consistent-hash assignment of keys to members ([`View`]).
//! - `membership`: the member's own Lease and the live set, judged on the local clock.
//! - `handover`: the admission gate and the drain/ack protocol ([`Ring`]).
//! - `metrics`: per-ring metrics and the health check.
//! - `layer`: the gate as a tower layer in front of a controller's service ([`ShardLayer`]).
//! - `requeue`: re-enqueues the keys a replica gains ([`requeue_gained`]).
//! - `missed`: the keys it dropped lately, whose events go ahead when it gains them.
//! - `label`: label mode's choice, label key, values and selectors ([`ShardAssignment`]).
//! - `assign`: label mode's informers and label loop: claim, move, reclaim ([`sharded_informer`]).
//! - `presence`: label mode's "absent from the cache is not deleted" check for the gate.

mod assign;
mod handover;
mod label;
mod layer;
mod membership;
mod metrics;
mod missed;
mod presence;
mod requeue;
mod ring;

pub use assign::sharded_informer;
pub use label::{LABEL_PREFIX, ShardAssignment, ShardLabel, label_key, member_value};

pub use handover::{Admitted, Ownership, Ring, RingConfig};
pub use layer::{ShardLayer, ShardService};
pub use membership::{RING_LABEL, VIEW_ANNOTATION, lease_name};
pub use metrics::{LabelWrite, RingMetrics};
pub use requeue::requeue_gained;
pub use ring::{DEFAULT_VNODES, View, stable_hash};

use crate::informer::{InformerResource, ObjectKey};
use crate::object::controller_owner;

/// The key an object is assigned by in a ring whose primary kind is `K`: its controlling owner's
/// key when that owner is a `K` (so what `owns` enqueues lands on the owner's member), else its
/// own.
pub fn shard_key<K: InformerResource>(obj: &impl kube::ResourceExt) -> ObjectKey {
    controller_owner::<K>(obj).unwrap_or_else(|| ObjectKey::from_object(obj))
}
