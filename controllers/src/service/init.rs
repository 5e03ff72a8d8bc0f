//! Registers the service-lb controller: Service handler (resync 30 s) → `service` queue →
//! `sync_service` workers; Node handler (resync 100 s) → `node` queue → one `sync_nodes` worker
//! whose failures go back to the `service` queue. Both queues back off per key 5 s → 300 s with
//! no token bucket, as upstream.

use std::convert::Infallible;
use std::sync::Arc;

use controller_manager::controller::{Action, Controller, Request, layers};
use controller_manager::informer::{Event, Store};
use controller_manager::manager::{InitContext, InitError, InitOutcome, Initializer};
use controller_manager::workqueue::ItemExponential;
use k8s_openapi::api::core::v1::{Node, Service};

use super::predicates::wants_load_balancer;
use super::{
    CONTROLLER_NAME, EVENT_COMPONENT, MAX_RETRY_DELAY, MIN_RETRY_DELAY, NODE_RESYNC_PERIOD,
    SERVICE_RESYNC_PERIOD, ServiceController, ServiceLister, ServiceMetrics, service_key,
};
use crate::context::CloudContext;
use crate::wiring::{RECONCILE_TIMEOUT, RecorderSink, queue_error};

/// Permanent short alias accepted by `--controllers`, as upstream.
pub const CONTROLLER_ALIAS: &str = "service";

/// The one key of the node queue: every node change leads to the same full pass, so events
/// arriving while a pass is queued coalesce into it.
const NODE_SYNC_KEY: &str = "node-sync";

/// The client name of this controller's API client (upstream `ClientName`): its user agent
/// suffix, and with `--use-service-account-credentials` its ServiceAccount in `kube-system`.
pub const CLIENT_NAME: &str = "service-controller";

/// How logs, spans and `controller_runtime_*` metrics name the node-sync loop of this controller:
/// the canonical name, qualified, so its numbers stay apart from the Service workers'.
const NODE_SYNC_NAME: &str = "service-lb-controller/node-sync";

/// The `service-lb-controller` entry of the initializer map.
pub fn initializer() -> Initializer<CloudContext> {
    Initializer::new(CONTROLLER_NAME, init).alias(CONTROLLER_ALIAS)
}

impl ServiceLister for Store<Service> {
    fn get(&self, ns: &str, name: &str) -> Option<Arc<Service>> {
        Store::get(
            self,
            &controller_manager::informer::ObjectKey::namespaced(ns, name),
        )
    }
}

async fn init(ctx: InitContext<CloudContext>) -> Result<InitOutcome, InitError> {
    let cloud = ctx.extra.cloud.clone();
    if cloud.load_balancer().is_none() {
        return Ok(InitOutcome::NotStarted(format!(
            "cloud provider {:?} does not support load balancers",
            cloud.provider_name()
        )));
    }
    let options = &ctx.extra.options;
    let workers = options.concurrent_service_syncs as usize;
    let client = ctx.client_for(CLIENT_NAME).await?;
    let services = ctx.factory.informer::<Service>();
    let nodes = ctx.factory.informer::<Node>();
    let limiter = || ItemExponential::new(MIN_RETRY_DELAY, MAX_RETRY_DELAY);
    let service_queue = ctx.queue::<String>(CONTROLLER_ALIAS, limiter());
    let node_queue = ctx.queue::<String>("node", limiter());

    let q = service_queue.clone();
    services
        .add_handler_with_resync(
            move |event: &Event<Service>| {
                let key = match event {
                    Event::Added(new) => ServiceController::service_event_keys(None, new),
                    Event::Updated { old, new } => {
                        ServiceController::service_event_keys(Some(old), new)
                    }
                    // Upstream has no delete handler and relies on the finalizer; a Service
                    // deleted without it (finalizer never added) still needs its LB deleted.
                    Event::Deleted(old) => wants_load_balancer(old).then(|| service_key(old)),
                };
                if let Some(key) = key {
                    q.add(key);
                }
            },
            SERVICE_RESYNC_PERIOD,
        )
        .detach();
    let q = node_queue.clone();
    nodes
        .add_handler_with_resync(
            move |event: &Event<Node>| {
                let trigger = match event {
                    Event::Added(n) => ServiceController::node_event_triggers(None, Some(n)),
                    Event::Updated { old, new } => {
                        ServiceController::node_event_triggers(Some(old), Some(new))
                    }
                    Event::Deleted(n) => ServiceController::node_event_triggers(Some(n), None),
                };
                if trigger {
                    q.add(NODE_SYNC_KEY.to_string());
                }
            },
            NODE_RESYNC_PERIOD,
        )
        .detach();

    let controller = Arc::new(
        ServiceController::new(
            cloud,
            client.clone(),
            options.cluster_name.clone(),
            Arc::new(services.store()),
            Arc::new(nodes.store()),
            Arc::new(RecorderSink(ctx.event_recorder(&client, EVENT_COMPONENT))),
        )?
        .with_metrics(ctx.register_metrics(ServiceMetrics::new)),
    );

    let metrics = ctx.controller_metrics();
    let c = controller.clone();
    let sync_service = layers::standard(CONTROLLER_NAME, &metrics, RECONCILE_TIMEOUT).service_fn(
        move |req: Request<String>| {
            let c = c.clone();
            async move {
                c.sync_service(&req.key)
                    .await
                    .map(|()| Action::Done)
                    .map_err(|e| {
                        let after = e.retry_after();
                        queue_error(e, after)
                    })
            }
        },
    );
    let c = controller.clone();
    let retry = service_queue.clone();
    let sync_nodes = layers::standard(NODE_SYNC_NAME, &metrics, RECONCILE_TIMEOUT).service_fn(
        move |_req: Request<String>| {
            let c = c.clone();
            let retry = retry.clone();
            async move {
                for key in c.sync_nodes(workers).await {
                    retry.add(key);
                }
                Ok::<_, Infallible>(Action::Done)
            }
        },
    );
    let service_workers =
        Controller::new(CONTROLLER_NAME, service_queue, sync_service).workers(workers);
    let node_worker = Controller::new(NODE_SYNC_NAME, node_queue, sync_nodes).workers(1);
    let shutdown = ctx.shutdown.clone();
    Ok(InitOutcome::Started(Box::pin(async move {
        tokio::join!(
            service_workers.run(shutdown.clone()),
            node_worker.run(shutdown.clone())
        );
    })))
}
