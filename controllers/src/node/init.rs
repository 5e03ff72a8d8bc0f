//! Registers the cloud-node controller with the manager: Node handler → `Nodes` queue →
//! `sync_node` workers, plus the periodic address refresh in its own task (`refresh.rs`).

use std::sync::Arc;

use controller_manager::controller::Controller;
use controller_manager::informer::Event;
use controller_manager::manager::{InitContext, InitError, InitOutcome, Initializer};
use controller_manager::shard::requeue_gained;
use k8s_openapi::api::core::v1::Node;
use kube::Api;

use super::{NodeController, NodeEvent, NodeMetrics, node_key_for_event, refresh};
use crate::context::CloudContext;
use crate::names::cloud_node::{CLIENT_NAME, CONTROLLER_ALIAS, CONTROLLER_NAME, EVENT_COMPONENT};
use crate::node_parts::{NodeControllerError, NodeParts};
use crate::wiring::{RecorderSink, reconcile_service};

/// The `cloud-node-controller` entry of the initializer map.
pub fn initializer() -> Initializer<CloudContext> {
    Initializer::new(CONTROLLER_NAME, init)
        .alias(CONTROLLER_ALIAS)
        .shardable()
}

async fn init(ctx: InitContext<CloudContext>) -> Result<InitOutcome, InitError> {
    let cloud = ctx.extra.cloud.clone();
    if let Err(missing) = NodeControllerError::check(cloud.as_ref()) {
        return Ok(InitOutcome::NotStarted(missing.to_string()));
    }
    let options = &ctx.extra.options;
    let client = ctx.client_for(CLIENT_NAME).await?;
    let informer = ctx.sharded_informer::<Node>();
    let queue = ctx.queue::<String>("Nodes", ctx.default_rate_limiter());
    let q = queue.clone();
    informer
        .add_handler(move |event: &Event<Node>| {
            let event = match event {
                Event::Added(n) => NodeEvent::Added(n),
                Event::Updated { old, new } => NodeEvent::Updated { old, new },
                Event::Deleted(n) => NodeEvent::Deleted(n),
            };
            if let Some(key) = node_key_for_event(&event) {
                q.add(key);
            }
        })
        .detach();

    let shard = ctx.shard().cloned();
    let controller = Arc::new(
        NodeController::new(
            NodeParts::new(
                cloud,
                Api::all(client.clone()),
                Arc::new(informer.store()),
                Arc::new(RecorderSink(ctx.event_recorder(&client, EVENT_COMPONENT))),
            )?,
            ctx.register_metrics(NodeMetrics::new),
        )
        .with_shard(shard.clone()),
    );

    let reconciler = controller.clone();
    let service = reconcile_service(
        CONTROLLER_NAME,
        &ctx.controller_metrics(),
        shard.clone(),
        move |key: String| {
            let c = reconciler.clone();
            async move { c.sync_node(&key).await }
        },
    );
    // Sharded: a Node this replica gains is synced again, as every listed one is at start.
    let gained = shard.map(|ring| {
        requeue_gained(
            ring,
            informer.store(),
            queue.clone(),
            |node: &Node| node_key_for_event(&NodeEvent::Added(node)),
            ctx.shutdown.clone(),
        )
    });
    let workers = Controller::new(CONTROLLER_NAME, queue, service)
        .workers(options.concurrent_node_syncs as usize);

    let period = options.node_status_update_frequency.get();
    let status_workers = options.node_status_update_workers();
    let metrics = ctx.controller_metrics();
    let shutdown = ctx.shutdown.clone();
    Ok(InitOutcome::Started(Box::pin(async move {
        // Its own task: a refresh loop that dies is logged when it dies and leaves the workers
        // running; on shutdown both stop and both are awaited.
        let refresh = refresh::spawn(
            controller,
            period,
            status_workers,
            &metrics,
            shutdown.clone(),
        );
        let refresh = refresh.stopped();
        let workers = async move {
            match gained {
                Some(gained) => {
                    tokio::join!(workers.run(shutdown), gained);
                }
                None => workers.run(shutdown).await,
            }
        };
        tokio::pin!(refresh, workers);
        tokio::select! {
            () = &mut workers => refresh.await,
            () = &mut refresh => workers.await,
        }
    })))
}
