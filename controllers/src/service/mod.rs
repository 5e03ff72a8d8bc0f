//! The service (LoadBalancer) controller, `service-lb-controller` (alias `service`): gives every
//! Service of type LoadBalancer a cloud load balancer, publishes its ingress points, keeps its
//! backends in step with the eligible nodes, and deletes it when the Service goes.
//!
//! This module is the controller's logic only; the framework wires it to the shared informers
//! and work queues. The caller's contract, from upstream (kubernetes/cloud-provider
//! `controllers/service/controller.go`):
//! - Service Add/Update events map to keys with [`ServiceController::service_event_keys`]
//!   (handler resync 30 s, so pending cleanups are retried); Node events trigger a node sync
//!   when [`ServiceController::node_event_triggers`] says so.
//! - Service keys go to [`ServiceController::sync_service`]: success ⇒ forget; an error whose
//!   [`ServiceSyncError::retry_after`] is set ⇒ requeue after exactly that; other errors ⇒
//!   rate-limited requeue (per-item exponential 5 s → 300 s, no token bucket).
//! - Node changes go to a [`NodeChanges`] coalescer; each burst it answers puts the keys of
//!   [`ServiceController::node_sync_keys_since`] on the `node` queue, whose
//!   `--concurrent-service-syncs` workers run [`ServiceController::sync_load_balancer_hosts`],
//!   one load balancer per key, retried per key with backoff ([`run_node_sync`]).
//!
//! Submodules: [`predicates`] (pure rules), `patch` (finalizer and status writes),
//! `sync` (one Service), `node_sync` (backend updates), `node_set` (the eligible set, shared),
//! `coalesce` (when node changes are answered), [`metrics`], `error`.
//!
//! # Differences from upstream (deliberate, safe)
//! - A Service with a `deletionTimestamp` is always taken down the cleanup path, never the ensure
//!   path, so the cleanup finalizer is never re-added to a deleting Service and no load balancer
//!   is (re)created for it (upstream re-adds it, cloud-provider-gcp #981).
//! - The finalizer is removed only after `EnsureLoadBalancerDeleted` succeeded, returned
//!   `ImplementedElsewhere` (another controller owns the load balancer, as upstream), or
//!   `GetLoadBalancer` reported no load balancer; any error keeps it (as upstream).
//! - Node syncs are throttled (`--node-sync-batch-period`, default 2 s; `0s` answers every
//!   change at once, as upstream): the first change of a burst is answered one period after it,
//!   and the changes until then are folded into that answer; while changes keep coming each next
//!   answer waits twice as long, up to `--node-sync-max-batch-period` (default 60 s), and once the
//!   set has been still for one period what is pending is answered and the period resets. So the
//!   first change of a burst is never held longer than the period, and a burst of any length
//!   costs each load balancer a few calls (a steady 300 s scale-up: nine). Each load balancer is
//!   its own key on the `node` queue, updated with the node set of the moment its turn comes, and
//!   one slow or failing load balancer holds no other. The eligible set is built once per change
//!   of the Node cache and shared, so deciding that a load balancer is in step costs O(1), not a
//!   filter and comparison of every Node (`node_set`). Upstream queues the
//!   changed Node's name for one worker whose every item is a pass over all load balancers (the
//!   bench `node_churn` runs that algorithm beside this one). A failed update is retried on that queue with the
//!   5 s → 300 s backoff (upstream hands the Service to the service queue for a full sync), and
//!   the node set recorded per Service is only one the cloud accepted (upstream records it
//!   before the call, so a failed or timed-out call was never retried).
//! - Not ported: the Normal events upstream `needsUpdate` emits per changed field (`Type`,
//!   `LoadBalancerSourceRanges`, ...): the handler filter is a pure function here and returns the
//!   cause as [`predicates::UpdateCause`] for logs instead. A nil status from `EnsureLoadBalancer`
//!   cannot happen (the trait returns a value), and listers cannot fail, so "listing failures
//!   count as retry" has no counterpart.
//!
//! # Upstream behaviour → test
//! | Behaviour (reference §3.3) | Test |
//! |---|---|
//! | wantsLoadBalancer / needsCleanup | `predicates::tests::{wants_load_balancer_table, needs_cleanup_table}` |
//! | needsUpdate, all 11 rules and ignored fields | `predicates::tests::update_cause_table` |
//! | exclusion label (ParseBool, unparsable ⇒ excluded), autoscaler taint, readiness ignored | `predicates::tests::{exclusion_label_table, stable_node_predicate_table}` |
//! | shouldSyncUpdatedNode | `predicates::tests::should_sync_updated_node_table`, `node_sync::tests::node_event_triggers_table` |
//! | nodes sufficiently equal | `predicates::tests::nodes_sufficiently_equal_table`; the shared set agrees with it: `node_set::tests::sameness_is_upstreams_sufficiently_equal` |
//! | two-way SMP bodies for finalizer and status | `patch::tests::{finalizers_patch_table, status_patch_table}` |
//! | RetryError stays detectable | `error::tests::retry_after_survives_wrapping` |
//! | UpdateLoadBalancerFailed lists ≤ 20 names | `node_sync::tests::node_names_are_limited` |
//! | metric names | `metrics::tests::registers_upstream_names` |
//! | handler key filter (Add/Update, resync retries pending cleanup) | `sync::tests::service_event_keys_table` |
//!
//! End to end (`tests/service_lb.rs` and `tests/service_node_sync.rs`, kube-testenv + fake cloud, real `kube::Client`):
//!
//! | Behaviour | Test |
//! |---|---|
//! | finalizer patched (status subresource) before the cloud call, then ingress status; events `EnsuringLoadBalancer`, `EnsuredLoadBalancer`; idle resync writes nothing | `creates_lb_with_finalizer_first_then_ingress_status` |
//! | cloud error: finalizer stays, `SyncLoadBalancerFailed` with upstream wording | `cloud_error_leaves_finalizer_and_reports_event` |
//! | `Retry{after}` detectable through the sync error | `retry_after_from_the_cloud_is_detectable`, `delete_cloud_errors_keep_the_finalizer` |
//! | `ImplementedElsewhere` on ensure: success, no status write | `implemented_elsewhere_keeps_finalizer_and_skips_status` |
//! | no eligible nodes: `UnAvailableLoadBalancer`, ensure still called | `no_eligible_nodes_warns_but_still_ensures` |
//! | delete: `EnsureLoadBalancerDeleted` then finalizer removed; status-patch 404 ignored | `delete_runs_cloud_delete_then_removes_finalizer` |
//! | GetLoadBalancer / delete errors keep the finalizer | `delete_cloud_errors_keep_the_finalizer` |
//! | type change LoadBalancer → ClusterIP cleans up | `type_change_deletes_lb_and_clears_status` |
//! | deleting Service never regains the finalizer (safe difference) | `deleting_service_never_regains_the_finalizer` |
//! | Service deleted mid-reconcile: cache-driven non-finalizer delete | `service_deleted_mid_reconcile_cleans_up_from_the_cache` |
//! | recreated Service (new UID): old LB deleted first | `recreated_service_deletes_the_old_load_balancer_first` |
//! | node-set change ⇒ one `UpdateLoadBalancer`, exclusion label, no call when equal | `node_set_change_updates_backends_once` |
//! | node-sync failure ⇒ `UpdateLoadBalancerFailed`, error metric, retried from the accepted set | `failed_node_sync_is_retried_from_the_set_the_cloud_accepted` |
//! | a failed ensure records no node set; no host update before an ensure succeeded | `a_load_balancer_not_yet_ensured_gets_no_host_update` |
//! | manager with leader election on: one failing LB retried with backoff, others not held | `manager_with_leader_election_retries_a_failed_node_sync` |
//!
//! Node-sync bounds on the paused clock (`tests/service_node_sync_bounds.rs`, production
//! [`run_node_sync`]): `a_burst_costs_each_load_balancer_a_few_updates_whatever_its_length`,
//! `a_300_s_scale_up_costs_each_load_balancer_at_most_ten_updates`,
//! `a_cap_equal_to_the_period_costs_one_update_per_period`,
//! `without_coalescing_a_burst_updates_each_load_balancer_per_round`,
//! `a_single_change_reaches_every_load_balancer_within_the_period`,
//! `a_failing_or_hung_load_balancer_holds_no_other`; the coalescer's schedule in
//! `coalesce::tests`; SIGTERM during a pass with the real binary in
//! `bin/tests/sigterm_mid_pass.rs`.
//! | update error with LB gone is success | `node_sync_ignores_update_errors_when_lb_is_gone` |
//! | not started without the LoadBalancer facet | `not_started_without_load_balancer_facet` |
//! | API conflict on the finalizer patch: error before any cloud call | `api_conflict_on_finalizer_patch_stops_before_the_cloud` |
//! | failed status write returned; retry re-ensures idempotently and writes status | `failed_status_write_is_retried_without_a_second_load_balancer` |

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;

// The names `init.rs` registers the controller and records its events under.
use crate::names::service_lb::{CONTROLLER_NAME, EVENT_COMPONENT};

mod coalesce;
mod error;
mod init;
pub mod metrics;
mod node_set;
mod node_sync;
pub mod patch;
pub mod predicates;
mod sync;

pub use coalesce::NodeChanges;
pub use error::{ServiceSyncError, UpdateHostsError};
pub use init::{ServiceLane, initializer, run_node_sync, service_lane};
pub use metrics::ServiceMetrics;
pub use node_set::NodeRevision;
pub use sync::{NewServiceControllerError, ServiceController, service_key};

/// Resync period of the Service event handler; a resync can only enqueue pending cleanups, so
/// this is how often a stuck cleanup is retried (upstream `serviceSyncPeriod`).
pub const SERVICE_RESYNC_PERIOD: Duration = Duration::from_secs(30);
/// Resync period of the Node event handler; resyncs never trigger a node sync (upstream
/// `nodeSyncPeriod`).
pub const NODE_RESYNC_PERIOD: Duration = Duration::from_secs(100);
/// First delay of the per-item exponential retry of a Service key (upstream `minRetryDelay`).
pub const MIN_RETRY_DELAY: Duration = Duration::from_secs(5);
/// Cap of the per-item exponential retry of a Service key (upstream `maxRetryDelay`).
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

/// Read access to the Service cache, so the controller works on any informer store (and on a
/// vector in tests) without knowing which.
pub trait ServiceLister: Send + Sync {
    /// The cached Service `ns/name`, if the cache has it.
    fn get(&self, ns: &str, name: &str) -> Option<Arc<Service>>;
}

/// Read access to the Node cache; one trait for every controller that reads Nodes.
pub use crate::listers::NodeLister;
