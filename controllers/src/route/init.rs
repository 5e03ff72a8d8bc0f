//! Registers the node-route controller: a full route reconcile over the shared Node cache every
//! `--route-reconciliation-period`, on a non-sliding schedule, as upstream.

use std::sync::Arc;

use controller_manager::manager::{InitContext, InitError, InitOutcome, Initializer};
use k8s_openapi::api::core::v1::Node;

use super::cidrs::parse_cluster_cidrs;
use super::{CONTROLLER_NAME, EVENT_COMPONENT, RouteController, RouteMetrics};
use crate::context::CloudContext;
use crate::wiring::RecorderSink;

/// Permanent short alias accepted by `--controllers`, as upstream.
pub const CONTROLLER_ALIAS: &str = "route";

/// The client name of this controller's API client (upstream `ClientName`): its user agent
/// suffix, and with `--use-service-account-credentials` its ServiceAccount in `kube-system`.
pub const CLIENT_NAME: &str = "route-controller";

/// The `node-route-controller` entry of the initializer map.
pub fn initializer() -> Initializer<CloudContext> {
    Initializer::new(CONTROLLER_NAME, init).alias(CONTROLLER_ALIAS)
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
    let period = options.route_reconciliation_period.get();
    let shutdown = ctx.shutdown.clone();
    Ok(InitOutcome::Started(Box::pin(async move {
        controller.run(period, shutdown).await;
    })))
}
