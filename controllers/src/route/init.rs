//! Registers the node-route controller: a full route reconcile over the shared Node cache every
//! `--route-reconciliation-period`, on a non-sliding schedule, as upstream; or, with the gate
//! `CloudControllerManagerWatchBasedRoutesReconciliation`, on Node events (`watch.rs`).

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
        .not_shardable(
            "it reconciles the whole route table in one pass (ListRoutes against every Node), so no key has a single owner; it stays on the Lease holder",
        )
}

async fn init(ctx: InitContext<CloudContext>) -> Result<InitOutcome, InitError> {
    let options = &ctx.extra.options;
    if !options.configure_cloud_routes {
        return Ok(InitOutcome::NotStarted(
            "--configure-cloud-routes is false".to_string(),
        ));
    }
    let cloud = ctx.extra.cloud.clone();
    if cloud.routes().is_none() {
        return Ok(InitOutcome::NotStarted(format!(
            "cloud provider {:?} does not support routes",
            cloud.provider_name()
        )));
    }
    // Upstream exits here and crash-loops on the empty default; the error says what to set.
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
        let metrics = ctx.controller_metrics();
        let controller = Arc::new(controller);
        return Ok(InitOutcome::Started(Box::pin(async move {
            controller.run_watch_based(queue, &metrics, shutdown).await;
        })));
    }
    let period = options.route_reconciliation_period.get();
    Ok(InitOutcome::Started(Box::pin(async move {
        controller.run(period, shutdown).await;
    })))
}
