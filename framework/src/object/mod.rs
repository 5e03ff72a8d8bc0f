//! The writes every reconcile of a custom resource repeats, done once and done right:
//!
//! - [`finalizer`]: add a finalizer before acting, run the cleanup when the object is deleted,
//!   then remove it (kube-runtime's `finalizer`, controller-runtime's `controllerutil` finalizer
//!   helpers);
//! - [`patch_status`]: write the status subresource only when it differs from the cached one, so a
//!   controller never loops on its own writes;
//! - [`set_condition`] and friends: `status.conditions` with `observedGeneration` and
//!   `lastTransitionTime` kept the way apimachinery's `meta.SetStatusCondition` keeps them;
//! - [`controller_owner`]: the key of an object's controlling owner of a given kind.

mod conditions;
mod finalizer;
mod owners;
mod status;

pub use conditions::{
    find_condition, is_condition_false, is_condition_true, new_condition, remove_condition,
    set_condition,
};
pub use finalizer::{Finalizer, FinalizerError, finalizer};
pub use owners::{controller_owner, controller_owner_of};
pub use status::patch_status;
