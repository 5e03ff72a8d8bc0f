//! Registers the node-route controller: a full route reconcile over the shared Node cache every
//! `--route-reconciliation-period`, on a non-sliding schedule, as upstream; or, with the gate
//! `CloudControllerManagerWatchBasedRoutesReconciliation`, on Node events (`watch.rs`).
//!
//! Upstream's `startRouteController` skips the controller when `--configure-cloud-routes` is
//! false or the cloud has no routes, and fails the process on a bad `--cluster-cidr` otherwise
//! (`--allocate-node-cidrs` plays no part). The failure is checked before anything starts
//! ([`Initializer::validate`]), so no Lease is taken by a replica that can never run it.

use std::sync::Arc;

use controller_manager::manager::{InitContext, InitError, InitOutcome, Initializer};
use k8s_openapi::api::core::v1::Node;

use controller_manager::options::feature_gates::CLOUD_CONTROLLER_MANAGER_WATCH_BASED_ROUTES_RECONCILIATION;

use super::cidrs::parse_cluster_cidrs;
use super::watch;
use super::{RouteController, RouteMetrics};
use crate::context::CloudContext;
use crate::names::node_route::{CLIENT_NAME, CONTROLLER_ALIAS, CONTROLLER_NAME, EVENT_COMPONENT};
use crate::wiring::RecorderSink;

/// The `node-route-controller` entry of the initializer map.
pub fn initializer() -> Initializer<CloudContext> {
    Initializer::new(CONTROLLER_NAME, init)
        .alias(CONTROLLER_ALIAS)
        .validate(requirements)
        .not_shardable(
            "it reconciles the whole route table in one pass (ListRoutes against every Node), so no key has a single owner; it stays on the Lease holder",
        )
}

/// Why the controller is skipped in this configuration, as upstream; `None` if it runs.
fn skip_reason(ctx: &CloudContext) -> Option<String> {
    if !ctx.options.configure_cloud_routes {
        return Some("--configure-cloud-routes is false".to_string());
    }
    if ctx.cloud.routes().is_none() {
        return Some(format!(
            "cloud provider {:?} does not support routes",
            ctx.cloud.provider_name()
        ));
    }
    None
}

/// What [`init`] would refuse, before anything starts: a bad `--cluster-cidr` when the
/// controller would run (upstream crash-loops on the empty default after taking the Lease).
fn requirements(ctx: &CloudContext) -> Result<(), InitError> {
    if skip_reason(ctx).is_some() {
        return Ok(());
    }
    parse_cluster_cidrs(&ctx.options.cluster_cidr)?;
    Ok(())
}

async fn init(ctx: InitContext<CloudContext>) -> Result<InitOutcome, InitError> {
    if let Some(reason) = skip_reason(&ctx.extra) {
        return Ok(InitOutcome::NotStarted(reason));
    }
    let options = &ctx.extra.options;
    let cloud = ctx.extra.cloud.clone();
    // The backstop of `requirements`, which the manager checked before start.
    let cidrs = parse_cluster_cidrs(&options.cluster_cidr)?;
    let client = ctx.client_for(CLIENT_NAME).await?;
    let nodes = ctx.factory.informer::<Node>();
    let controller = RouteController::new(
        cloud,
        client.clone(),
        options.cluster_name.clone(),
        cidrs,
        Arc::new(nodes.store()),
        Arc::new(RecorderSink(ctx.event_recorder(&client, EVENT_COMPONENT))),
    )?
    .with_metrics(ctx.register_metrics(RouteMetrics::new));
    let shutdown = ctx.shutdown.clone();
    if ctx
        .extra
        .feature_gates
        .enabled(CLOUD_CONTROLLER_MANAGER_WATCH_BASED_ROUTES_RECONCILIATION)
    {
        let queue = ctx.queue::<String>(watch::QUEUE_NAME, watch::pass_rate_limiter());
        nodes.add_handler(watch::enqueue_for(&queue)).detach();
        let run = Arc::new(controller).run_watch_based(queue, &ctx.controller_metrics(), shutdown);
        return Ok(InitOutcome::Started(Box::pin(run)));
    }
    let period = options.route_reconciliation_period.get();
    let metrics = ctx.controller_metrics();
    Ok(InitOutcome::Started(Box::pin(async move {
        controller.run(period, &metrics, shutdown).await;
    })))
}
