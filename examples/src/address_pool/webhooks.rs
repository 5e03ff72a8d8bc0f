//! The `AddressPool` webhooks, served by metal-ccm on every replica (`--webhooks`):
//!
//! - `address-pool-defaults` (`/default-addresspool`): `assignment: Automatic` when unset;
//! - `address-pool-overlap` (`/validate-addresspool`): refuses a pool whose ranges cannot be
//!   read or overlap another pool's, read from the process's shared informer cache (MetalLB's
//!   rule, checked where MetalLB checks it);
//! - `address-pool-conversion` (`/convert-addresspool`): `v1alpha1` ⇄ `v1` through the hub.
//!
//! Their configurations are `docs/deploy/addresspool-webhooks.yaml`; the CRD's conversion stanza
//! is in `docs/deploy/addresspool-crd.yaml`.

use controller_manager::informer::Store;
use controller_manager::webhook::{
    Defaulter, HubAndSpoke, Review, Validator, Verdict, WebhookContext, WebhookInitError,
    WebhookInitializer, Webhooks,
};
use kube::ResourceExt;

use super::resource::{AddressPool, AddressRange, Assignment, first_overlap, ranges};
use super::v1alpha1;

/// The defaulting webhook's name in `--webhooks`.
pub const DEFAULTS: &str = "address-pool-defaults";
/// The validating webhook's name in `--webhooks`.
pub const OVERLAP: &str = "address-pool-overlap";
/// The conversion webhook's name in `--webhooks`.
pub const CONVERSION: &str = "address-pool-conversion";

/// The three webhooks, for metal-ccm's map (or a test's).
pub fn webhooks<C: Send + Sync + 'static>() -> Webhooks<C> {
    Webhooks::new()
        .with(WebhookInitializer::defaulting::<AddressPool, _, _, _>(
            DEFAULTS,
            "/default-addresspool",
            |_| async { Ok(Defaults) },
        ))
        .with(WebhookInitializer::validating::<AddressPool, _, _, _>(
            OVERLAP,
            "/validate-addresspool",
            no_overlap,
        ))
        .with(WebhookInitializer::conversion(
            CONVERSION,
            "/convert-addresspool",
            |_| async { Ok(HubAndSpoke::<AddressPool>::new().spoke::<v1alpha1::AddressPool>()) },
        ))
}

/// Writes `assignment: Automatic` into a pool that leaves it out.
pub struct Defaults;

impl Defaulter<AddressPool> for Defaults {
    async fn default(&self, _: &Review<AddressPool>, pool: &mut AddressPool) -> Verdict {
        pool.spec.assignment.get_or_insert(Assignment::Automatic);
        Verdict::allow()
    }
}

/// Refuses a pool whose ranges do not read or that overlaps another pool in the cache.
pub struct NoOverlap {
    pools: Store<AddressPool>,
}

async fn no_overlap<C>(ctx: WebhookContext<C>) -> Result<NoOverlap, WebhookInitError> {
    Ok(NoOverlap {
        pools: ctx.factory.informer::<AddressPool>().store(),
    })
}

impl Validator<AddressPool> for NoOverlap {
    async fn validate(&self, review: &Review<AddressPool>) -> Verdict {
        let Some(pool) = &review.object else {
            return Verdict::allow();
        };
        let mine = match ranges(pool) {
            Ok(mine) => mine,
            Err(why) => {
                let field = why.split(':').next().unwrap_or("spec.ranges").to_string();
                return invalid(why.clone()).with_cause(field, "FieldValueInvalid", why);
            }
        };
        let name = pool.name_any();
        let others = self.pools.list();
        let others = others.iter().filter(|other| other.name_any() != name);
        match first_overlap(&mine, others) {
            None => Verdict::allow(),
            Some(overlap) => {
                let field = format!("spec.ranges[{}]", overlap.index);
                let message = format!(
                    "{field} ({}) overlaps AddressPool {:?} ({}): two pools may not hand out the same address",
                    span(&overlap.range),
                    overlap.pool,
                    span(&overlap.theirs)
                );
                invalid(message).with_cause(
                    field,
                    "FieldValueInvalid",
                    format!("overlaps AddressPool {:?}", overlap.pool),
                )
            }
        }
    }
}

/// A 403 denial (`Verdict::deny`'s code, as controller-runtime's `Denied`, MetalLB's webhook):
/// kubectl prints its message as it is, where a 422 `Invalid` with causes would be printed as
/// the causes alone.
fn invalid(message: String) -> Verdict {
    Verdict::deny(message).with_reason("Forbidden")
}

/// `first-last`, as a range is written in `v1`.
fn span(range: &AddressRange) -> String {
    format!("{}-{}", range.first(), range.last())
}
