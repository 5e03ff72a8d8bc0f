//! Registers the cloud-node-lifecycle controller: a `monitor_nodes` pass every
//! `--node-monitor-period` over the shared Node cache (no queue, as upstream), behind the
//! standard layers as a [`Periodic`] loop named after the controller.

use std::sync::Arc;

use std::convert::Infallible;

use controller_manager::controller::{Period, Periodic};
use controller_manager::manager::{InitContext, InitError, InitOutcome, Initializer};
use k8s_openapi::api::core::v1::Node;
use kube::Api;

use super::{DeletionGuard, NodeLifecycleController};
use crate::context::CloudContext;
use crate::names::cloud_node_lifecycle::{
    CLIENT_NAME, CONTROLLER_ALIAS, CONTROLLER_NAME, EVENT_COMPONENT,
};
use crate::node_parts::{NodeControllerError, NodeParts};
use crate::wiring::RecorderSink;

/// The `cloud-node-lifecycle-controller` entry of the initializer map.
pub fn initializer() -> Initializer<CloudContext> {
    Initializer::new(CONTROLLER_NAME, init)
        .alias(CONTROLLER_ALIAS)
        .not_shardable(
            "it is one periodic pass over every Node with no work queue to gate by key; it stays on the Lease holder",
        )
}

async fn init(ctx: InitContext<CloudContext>) -> Result<InitOutcome, InitError> {
    let cloud = ctx.extra.cloud.clone();
    if let Err(missing) = NodeControllerError::check(cloud.as_ref()) {
        return Ok(InitOutcome::NotStarted(missing.to_string()));
    }
    let options = &ctx.extra.options;
    let grace = options.node_deletion_grace_period.get();
    let guard = DeletionGuard {
        missing_checks: if grace.is_zero() { 1 } else { 2 },
        grace_period: grace,
    };
    let client = ctx.client_for(CLIENT_NAME).await?;
    let informer = ctx.factory.informer::<Node>();
    let parts = NodeParts::new(
        cloud,
        Api::all(client.clone()),
        Arc::new(informer.store()),
        Arc::new(RecorderSink(ctx.event_recorder(&client, EVENT_COMPONENT))),
    )?;
    let controller = NodeLifecycleController::new(parts, guard);
    let period = Period::Sliding(options.node_monitor_period.get());
    let periodic = Periodic::new(CONTROLLER_NAME, period, &ctx.controller_metrics());
    let shutdown = ctx.shutdown.clone();
    Ok(InitOutcome::Started(Box::pin(async move {
        periodic
            .run(shutdown, || async {
                controller.monitor_nodes().await;
                Ok::<(), Infallible>(())
            })
            .await;
    })))
}
