//! `address-pool`: LoadBalancer addresses from `AddressPool` custom resources, as MetalLB's
//! `IPAddressPool` hands them out on bare metal.
//!
//! - [`resource`]: the `AddressPool` type, `v1` (`#[derive(CustomResource)]`), the storage
//!   version and conversion hub; [`v1alpha1`]: the older shape, still served, and its conversion.
//!   Their CRD ([`crd`]) is `docs/deploy/addresspool-crd.yaml`.
//! - [`webhooks`]: defaulting, overlap validation (from the shared cache) and conversion.
//! - [`allocator`]: [`AddressPools`], the LoadBalancer facet the static-inventory provider uses
//!   when this controller runs: one ingress IP per Service from the eligible pools.
//! - [`controller`]: the reconcile keeping each pool's status (allocated, free, `Ready`,
//!   `Overlapping`) and refusing overlapping pools with a condition and an Event.
//!
//! The controller reads the pools and the Services from the process's shared informers, the
//! Service one being the service controller's, so it adds one streaming list + WATCH (of pools)
//! to the process. Off under `--controllers=*`: the CRD must be installed first, so it runs only
//! when named (`--controllers=*,address-pool`).

pub mod allocator;
pub mod controller;
pub mod resource;
pub mod v1alpha1;
pub mod webhooks;

use controller_manager::builder::ControllerBuilder;
use controller_manager::builder::predicates::generation_changed;
use controller_manager::informer::Event;
use controller_manager::manager::{InitContext, InitError, InitOutcome, Initializer};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, ServiceReference, WebhookClientConfig,
    WebhookConversion,
};
use kube::CustomResourceExt;
use kube::api::Api;

pub use allocator::AddressPools;
pub use resource::{
    AddressPool, AddressPoolSpec, AddressPoolStatus, Assignment, IpRange, POOL_ANNOTATION,
};
pub use webhooks::webhooks;

/// The name `--controllers` knows it by.
pub const NAME: &str = "address-pool";

/// The initializer map entry; `pools` is the same value the provider allocates with.
pub fn initializer<C: Send + Sync + 'static>(pools: AddressPools) -> Initializer<C> {
    Initializer::new(NAME, move |ctx| init(ctx, pools.clone())).disabled_by_default()
}

async fn init<C: Send + Sync + 'static>(
    ctx: InitContext<C>,
    allocator: AddressPools,
) -> Result<InitOutcome, InitError> {
    let builder = ControllerBuilder::<AddressPool>::new(&ctx).with_predicate(generation_changed);
    let services = ctx.factory.informer::<Service>().store();
    let pools = builder.store();
    allocator.attach(pools.clone(), services.clone());
    let (all, everyone) = (pools.clone(), pools.clone());
    // Its own client (user agent `<binary>/address-pool`, its own limiter), as every controller.
    let client = ctx.client_for(NAME).await?;
    let ctx = controller::PoolContext {
        pools,
        services,
        api: Api::all(client.clone()),
        recorder: ctx.event_recorder(&client, NAME),
    };
    Ok(builder
        // A Service taking or releasing an address changes some pool's counts: recount them all.
        .watches_with_predicate(holds_address, move |_: &Service| all.keys())
        // A pool's addresses changing can start or end another pool's overlap.
        .watches_with_predicate(generation_changed, move |_: &AddressPool| everyone.keys())
        .start_fn(move |pool| controller::reconcile(ctx.clone(), pool)))
}

/// Whether an event may change which addresses Services hold.
fn holds_address(event: &Event<Service>) -> bool {
    let ips = |s: &Service| crate::ip_balancer::ingress_ips(s);
    match event {
        Event::Updated { old, new } => ips(old) != ips(new),
        Event::Added(s) | Event::Deleted(s) => !ips(s).is_empty(),
    }
}

/// The CRD: `v1` (storage) and `v1alpha1` served, converted by the `address-pool-conversion`
/// webhook at the in-cluster Service `kube-system/metal-ccm-webhook` (its `caBundle`, and with
/// `--webhook-service`/`--webhook-url` its client config, are written by metal-ccm itself).
pub fn crd() -> Result<CustomResourceDefinition, kube::core::crd::MergeError> {
    let mut crd =
        kube::core::crd::merge_crds(vec![v1alpha1::AddressPool::crd(), AddressPool::crd()], "v1")?;
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".to_string(),
        webhook: Some(WebhookConversion {
            conversion_review_versions: vec!["v1".to_string()],
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: "kube-system".to_string(),
                    name: "metal-ccm-webhook".to_string(),
                    path: Some("/convert-addresspool".to_string()),
                    port: Some(443),
                }),
                ..WebhookClientConfig::default()
            }),
        }),
    });
    Ok(crd)
}
