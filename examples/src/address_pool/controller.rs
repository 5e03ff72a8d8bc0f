//! The address-pool controller's reconcile: each pool's status says how many addresses are
//! allocated and free, and whether it is `Ready` or refused as `Overlapping` (or invalid), with the
//! generation it judged; a refusal is also an Event on the pool.

use std::sync::Arc;

use controller_manager::controller::Action;
use controller_manager::events::{EventRecorder, EventType};
use controller_manager::informer::Store;
use controller_manager::object::{is_condition_true, new_condition, patch_status, set_condition};
use k8s_openapi::api::core::v1::Service;
use kube::Resource;
use kube::api::Api;

use super::resource::{AddressPool, Refusal, usable};
use crate::ip_balancer::ingress_ips;

/// What a reconcile reads and writes.
#[derive(Clone)]
pub struct PoolContext {
    /// Every pool (the shared informer's store).
    pub pools: Store<AddressPool>,
    /// Every Service (the same store the service controller reads).
    pub services: Store<Service>,
    /// Where the status goes.
    pub api: Api<AddressPool>,
    /// Events about refused pools.
    pub recorder: EventRecorder,
}

/// Brings `pool`'s status up to date with the pools and Services in the cache.
pub async fn reconcile(ctx: PoolContext, pool: Arc<AddressPool>) -> kube::Result<Action> {
    let verdict = usable(&pool, &ctx.pools.list());
    let generation = pool.metadata.generation;
    let mut status = pool.status.clone().unwrap_or_default();
    let was = |t: &str| is_condition_true(&status.conditions, t);
    let (was_ready, was_overlapping) = (was("Ready"), was("Overlapping"));
    let (ready, overlapping) = match &verdict {
        Ok(_) => (
            new_condition(
                "Ready",
                true,
                "Allocatable",
                "addresses are handed out to LoadBalancer Services",
                generation,
            ),
            new_condition(
                "Overlapping",
                false,
                "NoOverlap",
                "no other pool holds these addresses",
                generation,
            ),
        ),
        Err(Refusal::Overlapping { with }) => {
            let message = format!(
                "addresses overlap AddressPool {with:?}, which was created first: none of this pool's addresses are handed out until the overlap is removed"
            );
            (
                new_condition("Ready", false, "Overlapping", message.clone(), generation),
                new_condition("Overlapping", true, "OverlapsPool", message, generation),
            )
        }
        Err(Refusal::Invalid(why)) => (
            new_condition("Ready", false, "InvalidAddresses", why.clone(), generation),
            new_condition("Overlapping", false, "NoOverlap", "", generation),
        ),
    };
    let refused = !ready.status.eq("True");
    if refused
        && (was_ready || was_overlapping != (overlapping.status == "True") || pool.status.is_none())
    {
        let reference = pool.object_ref(&());
        ctx.recorder.event(
            &reference,
            EventType::Warning,
            &ready.reason,
            &ready.message,
        );
    }
    set_condition(&mut status.conditions, ready);
    set_condition(&mut status.conditions, overlapping);

    let ranges = verdict.unwrap_or_default();
    let size = ranges.iter().fold(0u64, |n, r| n.saturating_add(r.len()));
    let services = ctx.services.list();
    let allocated = services
        .iter()
        .filter(|s| {
            ingress_ips(s)
                .iter()
                .any(|ip| ranges.iter().any(|r| r.contains(*ip)))
        })
        .count() as u64;
    status.allocated = allocated;
    status.free = size.saturating_sub(allocated);
    patch_status(&ctx.api, &pool, &status).await?;
    Ok(Action::Done)
}
