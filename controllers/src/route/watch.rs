//! The watch-based triggering mode of the route controller, behind the alpha gate
//! `CloudControllerManagerWatchBasedRoutesReconciliation` (KEP-5237, reference §3.4.2): Node
//! events instead of a timer. A queue named `Routes` holds the one key `routes`; Node adds and
//! deletes, and updates that change `spec.podCIDRs` or `status.addresses` (or re-deliver the same
//! resourceVersion, a resync), add it rate limited by a token bucket of one token per 10 s, burst
//! 1, no delay above 10 s: at most one pass per 10 s however many Nodes change. One worker runs
//! [`RouteController::reconcile_node_routes`]; a failed pass is added back rate limited (or after
//! exactly the delay of a cloud `Retry { after }`, see [`RouteError`](super::RouteError)). Events
//! arriving during a pass queue the key again for after it (the queue's dirty set), so none is
//! lost. `--route-reconciliation-period` is ignored in this mode, as upstream.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use controller_manager::controller::Controller;
use controller_manager::controller::layers::ControllerMetrics;
use controller_manager::informer::Event;
use controller_manager::workqueue::{RateLimiter, TokenBucket, WithMaxWait, WorkQueue};
use k8s_openapi::api::core::v1::Node;
use tokio_util::sync::CancellationToken;

use super::RouteController;
use crate::names::node_route::CONTROLLER_NAME;
use crate::wiring::reconcile_service;

/// Name of the queue (and its `workqueue_*` metrics), as upstream.
pub const QUEUE_NAME: &str = "Routes";
/// The single key every trigger adds.
pub const ROUTES_KEY: &str = "routes";
/// Shortest time between two passes.
pub const MIN_PASS_INTERVAL: Duration = Duration::from_secs(10);

/// Upstream's limiter of the `Routes` queue: one token per 10 s, burst 1, capped at 10 s.
pub fn pass_rate_limiter() -> impl RateLimiter<String> {
    WithMaxWait::new(
        TokenBucket::new(1.0 / MIN_PASS_INTERVAL.as_secs_f64(), 1),
        MIN_PASS_INTERVAL,
    )
}

/// Whether a Node event calls for a route pass (upstream's Node handlers).
pub fn node_event_triggers(event: &Event<Node>) -> bool {
    match event {
        Event::Added(_) | Event::Deleted(_) => true,
        Event::Updated { old, new } => {
            let cidrs = |n: &Node| n.spec.as_ref().and_then(|s| s.pod_cidrs.clone());
            let addresses = |n: &Node| n.status.as_ref().and_then(|s| s.addresses.clone());
            old.metadata.resource_version == new.metadata.resource_version
                || cidrs(old) != cidrs(new)
                || addresses(old) != addresses(new)
        }
    }
}

/// Adds [`ROUTES_KEY`] rate limited to `queue` for every Node event that calls for a pass.
pub fn enqueue_for(queue: &WorkQueue<String>) -> impl Fn(&Event<Node>) + Send + Sync + 'static {
    let queue = queue.clone();
    move |event: &Event<Node>| {
        if node_event_triggers(event) {
            queue.add_rate_limited(ROUTES_KEY.to_string());
        }
    }
}

impl RouteController {
    /// The one worker of the watch-based mode over `queue` (fed by [`enqueue_for`]), until
    /// `shutdown`: [`reconcile_service`] over [`RouteController::reconcile_node_routes`], as every
    /// queue-driven cloud controller is built. A failed pass goes back to the queue rate limited,
    /// or after exactly the delay a cloud `Retry { after }` asked for.
    pub fn run_watch_based(
        self: Arc<Self>,
        queue: WorkQueue<String>,
        metrics: &ControllerMetrics,
        shutdown: CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        let service = reconcile_service(CONTROLLER_NAME, metrics, None, move |_key: String| {
            let controller = self.clone();
            async move { controller.reconcile_node_routes().await }
        });
        Controller::new(CONTROLLER_NAME, queue, service)
            .workers(1)
            .run(shutdown)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeAddress, NodeSpec, NodeStatus};

    use super::*;

    fn node(rv: &str, cidr: &str, ip: &str) -> Arc<Node> {
        let mut n = Node {
            spec: Some(NodeSpec {
                pod_cidrs: Some(vec![cidr.to_string()]),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: Some(vec![NodeAddress {
                    type_: "InternalIP".into(),
                    address: ip.into(),
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        n.metadata.name = Some("n".into());
        n.metadata.resource_version = Some(rv.into());
        Arc::new(n)
    }

    fn update(old: Arc<Node>, new: Arc<Node>) -> Event<Node> {
        Event::Updated { old, new }
    }

    #[test]
    fn node_events_that_trigger_a_pass() {
        let base = node("1", "10.0.1.0/24", "10.0.0.1");
        assert!(node_event_triggers(&Event::Added(base.clone())));
        assert!(node_event_triggers(&Event::Deleted(base.clone())));
        // A resync re-delivers the same resourceVersion.
        assert!(node_event_triggers(&update(base.clone(), base.clone())));
        assert!(node_event_triggers(&update(
            base.clone(),
            node("2", "10.0.2.0/24", "10.0.0.1")
        )));
        assert!(node_event_triggers(&update(
            base.clone(),
            node("2", "10.0.1.0/24", "10.0.0.9")
        )));
        // Any other change (labels, conditions, heartbeats) does not.
        let mut relabeled = (*node("2", "10.0.1.0/24", "10.0.0.1")).clone();
        relabeled
            .metadata
            .labels
            .get_or_insert_default()
            .insert("a".into(), "b".into());
        assert!(!node_event_triggers(&update(base, Arc::new(relabeled))));
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_one_pass_per_ten_seconds() {
        let limiter = pass_rate_limiter();
        let key = ROUTES_KEY.to_string();
        assert_eq!(
            limiter.when(&key),
            Duration::ZERO,
            "the first trigger runs at once"
        );
        let next = limiter.when(&key);
        assert!(
            next > Duration::from_secs(9) && next <= MIN_PASS_INTERVAL,
            "{next:?}"
        );
        for _ in 0..100 {
            assert!(limiter.when(&key) <= MIN_PASS_INTERVAL, "never beyond 10 s");
        }
    }
}
