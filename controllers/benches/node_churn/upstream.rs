//! The baseline of the node churn bench: upstream's service controller node sync
//! (kubernetes/cloud-provider `controllers/service/controller.go`, 2026-06), written over our
//! parts, registered as `service-lb-controller` in place of ours. The Service lane is the stock one
//! (`service_lane`: `ServiceController::sync_service`, the same 5 s → 300 s per-key backoff); the
//! node lane is upstream's:
//!
//! - every Node Add and Delete, and every Update `shouldSyncUpdatedNode` lets through, adds the
//!   **Node's name** to a node queue with **one worker** (upstream `nodeWorker`), so distinct
//!   Nodes are distinct items and a scale-up of N Nodes queues up to 2N passes;
//! - each item is a full pass (`syncNodes`): every load-balanced Service, `--concurrent-service-syncs`
//!   at a time (`ParallelizeUntil`), and the next item waits for the whole pass;
//! - per Service (`nodeSyncService`): the eligible node set is compared with the last one
//!   **stored before the call** (success or not) and `UpdateLoadBalancer` is called if they are
//!   not sufficiently equal; on an error `GetLoadBalancer` checks the load balancer still exists,
//!   then `UpdateLoadBalancerFailed` is recorded and, after the pass, the Service key is added
//!   to the Service queue (plain `Add`), whose sync calls `EnsureLoadBalancer`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cloud_controllers::CloudContext;
use cloud_controllers::cloud::{CloudError, CloudProvider};
use cloud_controllers::event_sink::{EventSink, EventType};
use cloud_controllers::listers::NodeLister;
use cloud_controllers::names::service_lb::{
    CLIENT_NAME, CONTROLLER_ALIAS, CONTROLLER_NAME, EVENT_COMPONENT, NODE_SYNC_CONTROLLER,
};
use cloud_controllers::service::predicates::{
    filter_lb_nodes, nodes_sufficiently_equal, should_sync_updated_node, wants_load_balancer,
};
use cloud_controllers::service::{
    MAX_RETRY_DELAY, MIN_RETRY_DELAY, NODE_RESYNC_PERIOD, ServiceController, ServiceLister,
    service_lane,
};
use cloud_controllers::wiring::RecorderSink;
use controller_manager::controller::{Action, Controller, Request, layers};
use controller_manager::informer::{Event, Store};
use controller_manager::manager::{InitContext, InitError, InitOutcome, Initializer};
use controller_manager::workqueue::{ItemExponential, WorkQueue};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Resource;
use parking_lot::Mutex;

/// A pass has no deadline upstream; this only keeps a wedged bench from hanging forever.
const PASS_TIMEOUT: Duration = Duration::from_secs(3600);

/// The `service-lb-controller` entry with upstream's node sync.
pub fn initializer() -> Initializer<CloudContext> {
    Initializer::new(CONTROLLER_NAME, init).alias(CONTROLLER_ALIAS)
}

/// Upstream's node-sync state: the last node set per Service, stored before each call.
struct NodeSync {
    cloud: Arc<dyn CloudProvider>,
    cluster_name: String,
    controller: Arc<ServiceController>,
    services: Store<Service>,
    nodes: Store<Node>,
    events: Arc<dyn EventSink>,
    last_synced: Mutex<HashMap<String, Vec<Arc<Node>>>>,
    workers: usize,
    retry: WorkQueue<String>,
}

impl NodeSync {
    /// `syncNodes`: one pass over every load-balanced Service, then the failed ones go to the
    /// Service queue.
    async fn sync_nodes(&self) {
        let keys = self
            .controller
            .node_sync_keys_since(tokio::time::Instant::now());
        let failed: Vec<String> = futures::stream::iter(keys)
            .map(|key| async move { self.node_sync_service(&key).await.then_some(key) })
            .buffer_unordered(self.workers.max(1))
            .filter_map(|k| async move { k })
            .collect()
            .await;
        for key in failed {
            self.retry.add(key);
        }
    }

    /// `nodeSyncService`: whether the Service must be retried.
    async fn node_sync_service(&self, key: &str) -> bool {
        let Some((ns, name)) = key.split_once('/') else {
            return false;
        };
        let Some(svc) = ServiceLister::get(&self.services, ns, name) else {
            return false;
        };
        if !wants_load_balancer(&svc) {
            return false;
        }
        let new_nodes = filter_lb_nodes(&NodeLister::list(&self.nodes));
        let old_nodes = self
            .last_synced
            .lock()
            .insert(key.to_string(), new_nodes.clone())
            .map(|n| filter_lb_nodes(&n))
            .unwrap_or_default();
        if nodes_sufficiently_equal(&old_nodes, &new_nodes) {
            return false;
        }
        let Some(lb) = self.cloud.load_balancer() else {
            return false;
        };
        let svc_ref = svc.object_ref(&());
        let err = match lb
            .update_load_balancer(&self.cluster_name, &svc, &new_nodes)
            .await
        {
            Ok(()) => {
                let (type_, reason, message) = if new_nodes.is_empty() {
                    (
                        EventType::Warning,
                        "UnAvailableLoadBalancer",
                        "There are no available nodes for LoadBalancer",
                    )
                } else {
                    (
                        EventType::Normal,
                        "UpdatedLoadBalancer",
                        "Updated load balancer with new hosts",
                    )
                };
                self.events.emit(&svc_ref, type_, reason, message);
                return false;
            }
            Err(CloudError::ImplementedElsewhere) => return false,
            Err(err) => err,
        };
        // Upstream asks whether the load balancer still exists, 429 or not.
        if let Ok(None) = lb.get_load_balancer(&self.cluster_name, &svc).await {
            return false;
        }
        self.events.emit(
            &svc_ref,
            EventType::Warning,
            "UpdateLoadBalancerFailed",
            &format!("Error updating load balancer with new hosts: {err}"),
        );
        true
    }
}

async fn init(ctx: InitContext<CloudContext>) -> Result<InitOutcome, InitError> {
    let lane = service_lane(&ctx).await?;
    let options = &ctx.extra.options;
    let node_queue = ctx.queue::<String>(
        "node",
        ItemExponential::new(MIN_RETRY_DELAY, MAX_RETRY_DELAY),
    );
    let q = node_queue.clone();
    let nodes = ctx.factory.informer::<Node>();
    nodes
        .add_handler_with_resync(
            move |event: &Event<Node>| {
                let node = match event {
                    Event::Added(n) | Event::Deleted(n) => n,
                    Event::Updated { old, new } if should_sync_updated_node(old, new) => new,
                    Event::Updated { .. } => return,
                };
                q.add(node.metadata.name.clone().unwrap_or_default());
            },
            NODE_RESYNC_PERIOD,
        )
        .detach();
    let client = ctx.client_for(CLIENT_NAME).await?;
    let node_sync = Arc::new(NodeSync {
        cloud: ctx.extra.cloud.clone(),
        cluster_name: options.cluster_name.clone(),
        controller: lane.controller,
        services: ctx.factory.informer::<Service>().store(),
        nodes: nodes.store(),
        events: Arc::new(RecorderSink(ctx.event_recorder(&client, EVENT_COMPONENT))),
        last_synced: Mutex::default(),
        workers: options.concurrent_service_syncs as usize,
        retry: lane.queue,
    });
    let pass = layers::standard(
        NODE_SYNC_CONTROLLER,
        &ctx.controller_metrics(),
        PASS_TIMEOUT,
    )
    .service_fn(move |_: Request<String>| {
        let n = node_sync.clone();
        async move {
            n.sync_nodes().await;
            Ok::<_, std::convert::Infallible>(Action::Done)
        }
    });
    let node_worker = Controller::new(NODE_SYNC_CONTROLLER, node_queue, pass).workers(1);
    let shutdown = ctx.shutdown.clone();
    let service_workers = lane.run;
    Ok(InitOutcome::Started(Box::pin(async move {
        tokio::join!(service_workers, node_worker.run(shutdown));
    })))
}
