//! The node sync's bounds on tokio's paused clock, through the production pipeline
//! (`service::run_node_sync`: the coalescer, the `node` queue with its 5 s → 300 s backoff, the
//! standard layers with the per-load-balancer reconcile timeout, `--concurrent-service-syncs`
//! workers): a burst of node changes costs each load balancer a few `UpdateLoadBalancer` calls
//! whatever its length (the answers come at a doubling period while it goes on), the first change
//! reaches every load balancer within the period even while a burst goes on and the last one
//! within the period after it ends, and a failing or hung load balancer holds no other and is
//! retried with backoff.
//!
//! The Services are created in kube-testenv and provisioned by `sync_service` over HTTP on the
//! real clock; the clock is paused only after that, when the node sync (which talks to the cloud,
//! not the API) takes over. Node changes go straight into the controller's cache and to the
//! throttle, as the Node handler does for changes `node_event_triggers` accepts.

mod service_support;

use std::sync::Arc;
use std::time::Duration;

use cloud_controllers::service::{MAX_RETRY_DELAY, MIN_RETRY_DELAY, NodeChanges, run_node_sync};
use cloud_controllers::wiring::RECONCILE_TIMEOUT;
use controller_manager::controller::layers::ControllerMetrics;
use controller_manager::workqueue::{ItemExponential, WorkQueue};
use fake_cloud::{FakeCloud, FaultSpec, Method};
use prometheus_client::registry::Registry;
use service_support::*;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const PERIOD: Duration = Duration::from_secs(2);
const MAX_PERIOD: Duration = Duration::from_secs(60);
/// The defaults: 2 s, doubling up to 60 s.
const DEFAULTS: (Duration, Duration) = (PERIOD, MAX_PERIOD);

struct NodeSync {
    h: Harness,
    keys: Vec<String>,
    changes: NodeChanges,
    queue: WorkQueue<String>,
    stop: CancellationToken,
    task: JoinHandle<()>,
    joined: usize,
}

/// `lbs` provisioned Services over `["n0"]`, then the clock paused and the node sync running
/// with batch period `period`, doubling up to `max_period` while changes keep coming.
async fn start(
    h: Harness,
    lbs: usize,
    (period, max_period): (Duration, Duration),
    workers: usize,
) -> NodeSync {
    let keys = h.provision_many(lbs).await;
    h.cloud.clear_calls();
    tokio::time::pause();
    let changes = NodeChanges::new(period, max_period);
    let queue = WorkQueue::new(
        "node",
        ItemExponential::new(MIN_RETRY_DELAY, MAX_RETRY_DELAY),
    );
    let stop = CancellationToken::new();
    let task = tokio::spawn(run_node_sync(
        h.ctl.clone(),
        queue.clone(),
        changes.clone(),
        workers,
        ControllerMetrics::new(&mut Registry::default()),
        None,
        stop.clone(),
    ));
    NodeSync {
        h,
        keys,
        changes,
        queue,
        stop,
        task,
        joined: 1,
    }
}

async fn node_sync(lbs: usize, periods: (Duration, Duration), workers: usize) -> NodeSync {
    start(harness(&["n0"]).await, lbs, periods, workers).await
}

impl NodeSync {
    /// One more Node joins, as a node event the handler passes on.
    fn join_node(&mut self) {
        self.h.cache.add_node(node(&format!("n{}", self.joined)));
        self.joined += 1;
        self.changes.changed();
    }

    /// Nodes join one every `gap` for `count` nodes.
    async fn burst(&mut self, count: usize, gap: Duration) {
        for _ in 0..count {
            self.join_node();
            tokio::time::sleep(gap).await;
        }
    }

    /// The keys whose load balancer holds every joined node.
    fn up_to_date(&self) -> Vec<String> {
        self.keys
            .iter()
            .filter(|k| self.h.cloud.lb_for(k).unwrap().nodes.len() == self.joined)
            .cloned()
            .collect()
    }

    fn update_attempts(&self, key: &str) -> usize {
        self.h
            .cloud
            .calls_to(Method::UpdateLoadBalancer)
            .iter()
            .filter(|c| c.key == key)
            .count()
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task.await.unwrap();
    }
}

/// 100 Nodes joining over 10 s, then 450 more over 45 s, at 100 ms per `UpdateLoadBalancer` with 4 workers for 20 load balancers.
async fn burst_costs(periods: (Duration, Duration)) -> (Vec<usize>, Vec<usize>) {
    let mut s = node_sync(20, periods, 4).await;
    s.h.cloud
        .set_latency(Method::UpdateLoadBalancer, Duration::from_millis(100));
    s.burst(100, Duration::from_millis(100)).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(s.up_to_date(), s.keys, "converged after the first burst");
    let first: Vec<usize> = s.h.updates_per_lb().into_values().collect();

    s.h.cloud.clear_calls();
    s.burst(450, Duration::from_millis(100)).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(s.up_to_date(), s.keys, "converged after the long burst");
    let long: Vec<usize> = s.h.updates_per_lb().into_values().collect();
    s.stop().await;
    (first, long)
}

#[tokio::test]
async fn a_burst_costs_each_load_balancer_a_few_updates_whatever_its_length() {
    let (first, long) = burst_costs(DEFAULTS).await;
    // Answers at 2 and 6 s while the 10 s burst goes on, and 2 s after its last change.
    assert_eq!(first, [3; 20], "a 10 s burst");
    // At 2, 6, 14 and 30 s, and 2 s after the last change (44.9 s).
    assert_eq!(long, [5; 20], "a 45 s burst");
}

#[tokio::test]
async fn a_cap_equal_to_the_period_costs_one_update_per_period() {
    let (first, long) = burst_costs((PERIOD, PERIOD)).await;
    // Answers every 2 s while the burst goes on (and one more for a change on its last boundary).
    assert!(
        first.iter().all(|n| (5..=6).contains(n)),
        "a 10 s burst: {first:?}"
    );
    assert!(
        long.iter().all(|n| (22..=24).contains(n)),
        "a 45 s burst: {long:?}"
    );
}

/// The scale-up on the paused clock: 3,000 Nodes joining over 300 s (one every 100 ms)
/// under 20 load balancers at 100 ms a call.
#[tokio::test]
async fn a_300_s_scale_up_costs_each_load_balancer_at_most_ten_updates() {
    let mut s = node_sync(20, DEFAULTS, 4).await;
    let call = Duration::from_millis(100);
    s.h.cloud.set_latency(Method::UpdateLoadBalancer, call);
    let round = call * 20 / 4;
    s.join_node();
    let first = s.joined - 1;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut first_everywhere = None;
    for step in 1..3000u32 {
        s.join_node();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let name = format!("n{first}");
        if first_everywhere.is_none()
            && s.keys
                .iter()
                .all(|k| s.h.cloud.lb_for(k).unwrap().nodes.contains(&name))
        {
            first_everywhere = Some(Duration::from_millis(100) * step);
        }
    }
    let first_everywhere = first_everywhere.expect("the first Node reached every LB");
    assert!(
        first_everywhere <= PERIOD + round + Duration::from_millis(100),
        "the first Node is in every LB within the period plus one round: {first_everywhere:?}"
    );
    // The last Node: in every LB one period after the scale-up ended, plus one round.
    tokio::time::sleep(PERIOD + round + Duration::from_millis(100)).await;
    assert_eq!(s.up_to_date(), s.keys);
    let updates = s.h.updates_per_lb();
    assert!(
        updates.values().all(|n| *n <= 10),
        "at most 10 updates per LB: {updates:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_first_node_of_a_long_burst_is_in_every_load_balancer_within_the_period() {
    let mut s = node_sync(20, DEFAULTS, 4).await;
    let call = Duration::from_millis(100);
    s.h.cloud.set_latency(Method::UpdateLoadBalancer, call);
    s.join_node();
    // The burst goes on, a Node every 100 ms, for the period plus one round of the 4 workers
    // over the 20 load balancers.
    let round = call * 20 / 4;
    let steps = (PERIOD + round).as_millis() / 100;
    for _ in 0..steps {
        tokio::time::sleep(Duration::from_millis(100)).await;
        s.join_node();
    }
    for key in &s.keys {
        let lb = s.h.cloud.lb_for(key).unwrap();
        assert!(
            lb.nodes.contains(&"n1".to_string()),
            "{key}: {:?}",
            lb.nodes
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn without_coalescing_a_burst_updates_each_load_balancer_per_round() {
    // Upstream behaviour (`--node-sync-batch-period=0s`): every change re-queues every LB, so
    // each LB is updated once per round of the workers (20 LBs × 100 ms / 4 workers = 500 ms)
    // for as long as the burst lasts.
    let (first, _) = burst_costs((Duration::ZERO, MAX_PERIOD)).await;
    assert!(first.iter().all(|n| *n >= 15), "{first:?}");
}

#[tokio::test]
async fn a_single_change_reaches_every_load_balancer_within_the_period() {
    let period = Duration::from_millis(500);
    let mut s = node_sync(20, (period, MAX_PERIOD), 4).await;
    s.join_node();
    tokio::time::sleep(period - Duration::from_millis(1)).await;
    assert!(s.up_to_date().is_empty(), "not before the period");
    assert_eq!(s.queue.len(), 0);
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert_eq!(s.up_to_date(), s.keys);
    assert_eq!(
        s.h.updates_per_lb().into_values().collect::<Vec<_>>(),
        [1; 20]
    );
    // `nodesync_latency_seconds`: one observation per LB, each the batch period.
    let mut registry = Registry::default();
    registry.register("latency", "", s.h.metrics.nodesync_latency.clone());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(text.contains("latency_count 20\n"), "{text}");
    let sum: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("latency_sum "))
        .unwrap()
        .parse()
        .unwrap();
    // The timer wheel rounds up to the next millisecond.
    let bound = 20.0 * (period + Duration::from_millis(2)).as_secs_f64();
    assert!(sum <= bound, "{text}");
    s.stop().await;
}

#[tokio::test]
async fn a_failing_or_hung_load_balancer_holds_no_other() {
    let hung = "default/lb-001".to_string();
    let failing = "default/lb-003";
    let mut s = node_sync(10, DEFAULTS, 2).await;
    s.h.cloud.fail(
        Method::UpdateLoadBalancer,
        FaultSpec::hang().times(1).only_for(&hung),
    );
    s.h.cloud.fail(
        Method::UpdateLoadBalancer,
        FaultSpec::other("backend pool locked").only_for(failing),
    );
    s.join_node();
    tokio::time::sleep(PERIOD + Duration::from_millis(1)).await;
    // One worker is stuck in the hung call; the other updated the rest at once.
    let others: Vec<String> = s
        .keys
        .iter()
        .filter(|k| **k != hung && *k != failing)
        .cloned()
        .collect();
    assert_eq!(s.up_to_date(), others);
    assert_eq!(s.update_attempts(failing), 1);
    assert_eq!(s.h.metrics.nodesync_error.get(), 1);
    let reasons = s.h.events.reasons();
    let count = |reason: &str| reasons.iter().filter(|r| *r == reason).count();
    assert_eq!(count("UpdateLoadBalancerFailed"), 1);
    assert_eq!(count("UpdatedLoadBalancer"), 8);

    // The failing LB is retried with the per-key backoff: 5 s, then 10 s later.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(s.update_attempts(failing), 2);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(s.update_attempts(failing), 3);
    s.h.cloud.clear_faults();
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(s.update_attempts(failing), 4);
    assert!(s.up_to_date().contains(&failing.to_string()));

    // The hung call is abandoned at the reconcile timeout and retried 5 s later: its node set
    // was never recorded, so the retry calls the cloud again and succeeds.
    assert!(!s.up_to_date().contains(&hung));
    tokio::time::sleep(RECONCILE_TIMEOUT + MIN_RETRY_DELAY).await;
    assert_eq!(s.up_to_date(), s.keys);
    assert_eq!(
        s.update_attempts(&hung),
        1,
        "the hung call never reached the fake"
    );
    assert_eq!(s.queue.len(), 0);
    s.stop().await;
}

#[tokio::test]
async fn a_cloud_quota_paces_the_node_sync_instead_of_hammering_it() {
    use cloud_controllers::cloud::{BudgetOptions, InstrumentedCloud};
    use fake_cloud::RateLimit;
    // As the binary wraps the provider, with --cloud-api-pause-on-retry.
    let fake = FakeCloud::new();
    let budget = BudgetOptions {
        pause_on_retry: true,
        ..BudgetOptions::default()
    };
    let provider = InstrumentedCloud::new(Arc::new(fake.clone()), None).with_budget(&budget);
    let h = harness_with(&["n0"], fake, Arc::new(provider)).await;
    let mut s = start(h, 100, DEFAULTS, 10).await;
    // 20 calls/s, as a real cloud's API quota; over it, `Retry { after }` at once.
    s.h.cloud
        .set_rate_limit(Some(
            RateLimit::new(20.0, 20).methods([Method::UpdateLoadBalancer, Method::GetLoadBalancer]),
        ))
        .unwrap();
    s.h.cloud
        .set_latency(Method::UpdateLoadBalancer, Duration::from_millis(100));
    s.join_node();
    // 100 updates at 20/s (burst 20) after the period: 4 s at best.
    let start = tokio::time::Instant::now();
    while s.up_to_date() != s.keys {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = start.elapsed();
    assert!(took <= PERIOD + Duration::from_secs(5), "{took:?}");
    let updates = s.h.cloud.calls_to(Method::UpdateLoadBalancer);
    let refused = updates.iter().filter(|c| !c.outcome.is_ok()).count();
    // Without the pause, each refused key comes back after its own retry-after: 2,926 refused
    // of 3,026 calls.
    assert!(refused <= 60, "{refused} refused of {}", updates.len());
    s.stop().await;
}
