//! Registers the service-lb controller: Service handler (resync 30 s) → `service` queue →
//! `sync_service` workers; Node handler (resync 100 s) → [`NodeChanges`] (coalesced by
//! `--node-sync-batch-period`) → every load-balanced Service key on the `node` queue →
//! `sync_load_balancer_hosts` workers (`--concurrent-service-syncs`), one load balancer each;
//! while changes keep coming the answers come further apart, up to
//! `--node-sync-max-batch-period`.
//! Both queues back off per key 5 s → 300 s with no token bucket, as upstream, and honour a
//! cloud's `Retry { after }`.

use std::sync::Arc;
use std::time::Duration;

use controller_manager::controller::Controller;
use controller_manager::controller::layers::ControllerMetrics;
use controller_manager::informer::{Event, EventSource, Store, WithSource};
use controller_manager::manager::{InitContext, InitError, InitOutcome, Initializer};
use controller_manager::shard::{Ring, requeue_gained};
use controller_manager::workqueue::{ItemExponential, WorkQueue};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, Service};
use tokio_util::sync::CancellationToken;

use super::coalesce::NodeChanges;
use super::node_set::NodeRevision;
use super::predicates::wants_load_balancer;
use super::{
    CONTROLLER_NAME, EVENT_COMPONENT, MAX_RETRY_DELAY, MIN_RETRY_DELAY, NODE_RESYNC_PERIOD,
    SERVICE_RESYNC_PERIOD, ServiceController, ServiceLister, ServiceMetrics, service_key,
};
use crate::context::CloudContext;
use crate::names::service_lb::{CLIENT_NAME, CONTROLLER_ALIAS, NODE_SYNC_CONTROLLER};
use crate::wiring::{RecorderSink, reconcile_service};

/// The `service-lb-controller` entry of the initializer map.
pub fn initializer() -> Initializer<CloudContext> {
    Initializer::new(CONTROLLER_NAME, init)
        .alias(CONTROLLER_ALIAS)
        .shardable()
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
    let cloud = &ctx.extra.cloud;
    if cloud.load_balancer().is_none() {
        return Ok(InitOutcome::NotStarted(format!(
            "cloud provider {:?} does not support load balancers",
            cloud.provider_name()
        )));
    }
    let lane = service_lane(&ctx).await?;
    let options = &ctx.extra.options;
    let changes = NodeChanges::new(
        options.node_sync_batch_period.get(),
        options.node_sync_max_batch_period.get(),
    );
    let node_changes = changes.clone();
    ctx.factory
        .informer::<Node>()
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
                    node_changes.changed();
                }
            },
            NODE_RESYNC_PERIOD,
        )
        .detach();
    let node_queue = ctx.queue::<String>(
        "node",
        ItemExponential::new(MIN_RETRY_DELAY, MAX_RETRY_DELAY),
    );
    let node_sync = run_node_sync(
        lane.controller,
        node_queue,
        changes,
        options.concurrent_service_syncs as usize,
        ctx.controller_metrics(),
        ctx.shard().cloned(),
        ctx.shutdown.clone(),
    );
    let service_workers = lane.run;
    Ok(InitOutcome::Started(Box::pin(async move {
        tokio::join!(service_workers, node_sync);
    })))
}

/// The controller and its Service lane, as [`service_lane`] builds them.
pub struct ServiceLane {
    /// The controller, with its metrics registered and events recorded as `service-controller`.
    pub controller: Arc<ServiceController>,
    /// The `service` queue, for handing a Service a full sync.
    pub queue: WorkQueue<String>,
    /// Runs the `--concurrent-service-syncs` Service workers until the manager's shutdown.
    pub run: BoxFuture<'static, ()>,
}

/// Builds the controller over the shared informers and its Service lane: Service handler
/// (resync 30 s) → `service` queue → `sync_service` workers. The stock initializer adds the
/// coalesced node sync beside it; public so a different node sync can run beside the same
/// Service lane (the `node_churn` bench runs upstream's). Fails when the cloud has no load
/// balancers.
pub async fn service_lane(ctx: &InitContext<CloudContext>) -> Result<ServiceLane, InitError> {
    let options = &ctx.extra.options;
    let client = ctx.client_for(CLIENT_NAME).await?;
    let services = ctx.sharded_informer::<Service>();
    let queue = ctx.queue::<String>(
        CONTROLLER_ALIAS,
        ItemExponential::new(MIN_RETRY_DELAY, MAX_RETRY_DELAY),
    );
    let q = queue.clone();
    services
        .add_handler_with_resync(
            // Fresh changes first: after a takeover a new Service is provisioned before the
            // re-verification of every listed one (the initial list goes to the low tier).
            WithSource(move |event: &Event<Service>, source: EventSource| {
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
                    q.add_from(key, source);
                }
            }),
            SERVICE_RESYNC_PERIOD,
        )
        .detach();
    // Every Node event, after the cache took it: the eligible node set is built again only then.
    let node_revision = NodeRevision::default();
    let bump = node_revision.clone();
    ctx.factory
        .informer::<Node>()
        .add_handler_with_resync(move |_: &Event<Node>| bump.bump(), Duration::ZERO)
        .detach();
    let recorder = ctx.event_recorder(&client, EVENT_COMPONENT);
    let controller = Arc::new(
        ServiceController::new(
            ctx.extra.cloud.clone(),
            client,
            options.cluster_name.clone(),
            Arc::new(services.store()),
            Arc::new(ctx.factory.informer::<Node>().store()),
            Arc::new(RecorderSink(recorder)),
        )?
        .with_metrics(ctx.register_metrics(ServiceMetrics::new))
        .with_node_revision(node_revision)
        .with_shutdown(ctx.shutdown.clone()),
    );
    let c = controller.clone();
    let shard = ctx.shard().cloned();
    let sync_service = reconcile_service(
        CONTROLLER_NAME,
        &ctx.controller_metrics(),
        shard.clone(),
        move |key: String| {
            let c = c.clone();
            async move { c.sync_service(&key).await }
        },
    );
    let workers = Controller::new(CONTROLLER_NAME, queue.clone(), sync_service)
        .workers(options.concurrent_service_syncs as usize);
    let shutdown = ctx.shutdown.clone();
    // Sharded: a Service this replica gains is re-verified, as every listed one is at start.
    let gained = shard.map(|ring| {
        requeue_gained(
            ring,
            services.store(),
            queue.clone(),
            |svc: &Service| ServiceController::service_event_keys(None, svc),
            shutdown.clone(),
        )
    });
    Ok(ServiceLane {
        controller,
        queue,
        run: Box::pin(async move {
            match gained {
                Some(gained) => {
                    tokio::join!(workers.run(shutdown), gained);
                }
                None => workers.run(shutdown).await,
            }
        }),
    })
}

/// Runs the node sync until `shutdown`: each burst [`NodeChanges`] answers puts every
/// load-balanced Service on `queue`, and `workers` workers update one load balancer each, with
/// the standard layers (reconcile timeout per load balancer, not per pass). A failed or timed-out
/// update is retried with the queue's backoff, or after the cloud's `Retry { after }`; a key
/// waiting or in flight absorbs further bursts, so one slow or failing load balancer holds no
/// other.
pub async fn run_node_sync(
    controller: Arc<ServiceController>,
    queue: WorkQueue<String>,
    changes: NodeChanges,
    workers: usize,
    metrics: ControllerMetrics,
    shard: Option<Ring>,
    shutdown: CancellationToken,
) {
    let c = controller.clone();
    let sync_hosts =
        reconcile_service(NODE_SYNC_CONTROLLER, &metrics, shard, move |key: String| {
            let c = c.clone();
            async move { c.sync_load_balancer_hosts(&key).await }
        });
    let q = queue.clone();
    let answer = move |first_change| {
        for key in controller.node_sync_keys_since(first_change) {
            q.add(key);
        }
    };
    let node_workers = Controller::new(NODE_SYNC_CONTROLLER, queue, sync_hosts).workers(workers);
    tokio::join!(
        node_workers.run(shutdown.clone()),
        changes.run(shutdown, answer)
    );
}
