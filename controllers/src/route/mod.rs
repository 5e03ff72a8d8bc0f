//! The node-route controller, `node-route-controller` (alias `route`): makes the cloud's pod
//! network routes match every Node's `spec.podCIDRs` and reports the result in each Node's
//! `NetworkUnavailable` condition (reason `RouteCreated` / `NoRouteCreated`).
//!
//! Start conditions (upstream `startRouteController`): `--configure-cloud-routes`, the Routes
//! facet ([`RouteError::RoutesUnsupported`] ⇒ "not started"), and `--cluster-cidr`, parsed with
//! [`cidrs::parse_cluster_cidrs`] whose errors say what to set (upstream crash-loops on the empty
//! default). Submodules: [`cidrs`] (flag and CIDR arithmetic), [`plan`] (the pure decision of a
//! pass), `reconcile` (cloud calls, bounded concurrency, the periodic loop), [`condition`]
//! (the Node condition), [`metrics`].
//!
//! The default (non-watch) triggering mode is [`RouteController::run`]: a pass now and then every
//! period on a non-sliding schedule. The alpha watch-based mode (KEP-5237, gate
//! `CloudControllerManagerWatchBasedRoutesReconciliation`) is [`watch`]: Node events feed a
//! one-key queue whose limiter allows one pass per 10 s.
//!
//! # Differences from upstream
//! - `--cluster-cidr` errors are actionable messages instead of a terse fatal exit.
//! - [`RouteController::run`] raises a period below [`MIN_RECONCILIATION_PERIOD`] (1 s) to it;
//!   upstream would spin on `--route-reconciliation-period=0`.
//! - NetworkUnavailable writes of one pass are bounded to [`MAX_CONCURRENT_CONDITION_UPDATES`]
//!   in flight (upstream: one goroutine per node behind client-go's QPS limiter).
//! - The `FailedToCreateRoute` event references the Node by its real UID (upstream puts the node
//!   name in the UID field).
//! - In the watch-based mode a pass that fails on a cloud `Retry { after }` from `ListRoutes`
//!   runs again after exactly `after`, as the service controller honours it (upstream's route
//!   worker re-adds the key rate limited whatever the error); other failures back off as upstream.
//!
//! # Upstream behaviour → test
//! | Behaviour (reference §3.4) | Test |
//! |---|---|
//! | `--cluster-cidr` parsing, dual-stack rules, empty default | `cidrs::tests::{cluster_cidr_table, parse_cidr_table}` |
//! | ownership: first or last address in a cluster CIDR | `plan::tests::ownership_table`, `cidrs::tests::contains_table` |
//! | keep / add / update actions, address-set comparison | `plan::tests::plan_table` |
//! | deletions: unknown nodes, empty target, blackhole, stale CIDR; foreign untouched | `plan::tests::plan_table` |
//! | wait for deletions iff the first route tracks addresses | `plan::tests::plan_table` ("only the first route decides the wait") |
//! | creation carries node UID as name hint and node addresses | `plan::tests::creation_carries_name_hint_and_addresses` |
//! | NetworkUnavailable per node, empty map ⇒ True, none for untouched nodes | `plan::tests::network_unavailable_follows_creations` |
//! | condition skip-check compares status and reason; patch body | `condition::tests::{condition_current_table, patch_bodies}` |
//! | metric name | `metrics::tests::registers_upstream_name` |
//! | property: foreign routes never deleted; a pass converges (blackholes: two passes) | `plan::tests::properties::foreign_routes_survive_and_plans_converge` |
//! | at most 200 cloud operations in flight | `tests/over_fake_cloud/route_reconcile_pass.rs::at_most_200_cloud_operations_in_flight` |
//! | only a ListRoutes failure fails a pass; metric counted per pass | `tests/over_fake_cloud/route_reconcile_pass.rs::list_failure_fails_the_pass_and_counts_it` |
//! | not started without Routes facet or cluster CIDRs | `tests/over_fake_cloud/route_reconcile_pass.rs::needs_routes_facet_and_cidrs` |
//! | non-sliding period, first pass immediate, stops on shutdown | `tests/over_fake_cloud/route_reconcile_pass.rs::run_is_non_sliding_and_stops_on_shutdown` |
//! | zero period raised to 1 s (safe difference) | `tests/over_fake_cloud/route_reconcile_pass.rs::zero_period_is_raised_to_the_minimum` |
//! | watch-based mode: which Node events trigger; one pass per 10 s at most | `watch::tests::{node_event_triggers, at_most_one_pass_per_ten_seconds}` |
//! | (ours) watch-based mode: a cloud `Retry { after }` runs the next pass after exactly `after` | `tests/over_fake_cloud/route_reconcile_pass.rs::watch_based_retry_runs_the_next_pass_after_exactly_the_delay` |
//!
//! End to end (`tests/route_reconcile.rs`, kube-testenv + fake cloud):
//!
//! | Behaviour | Test |
//! |---|---|
//! | dual-stack routes created with the node UID as name hint; `RouteCreated`; idle pass writes nothing | `creates_dual_stack_routes_and_reports_route_created` |
//! | stale, empty-target and blackholed routes deleted; foreign routes untouched | `deletes_stale_and_blackholed_routes_and_leaves_foreign_ones` |
//! | failed create ⇒ `FailedToCreateRoute` on the Node, `NoRouteCreated`; recovers next pass | `failed_create_emits_event_and_marks_network_unavailable` |
//! | condition from a CNI with another reason is overwritten | `cni_condition_with_another_reason_is_overwritten` |
//! | nodes without pod CIDRs: True when routes target them, else no write | `nodes_without_pod_cidrs` |
//! | list failure fails the pass, nothing written | `list_failure_fails_the_pass` |
//! | node deleted mid-pass: condition 404 only logged | `deleted_node_mid_pass_is_only_logged` |
//! | condition write: 409 retried, other errors logged and left to the next pass | `condition_write_conflicts_are_retried_other_errors_logged` |

use std::time::Duration;

pub mod cidrs;
pub mod condition;
mod init;
pub mod metrics;
pub mod plan;
mod reconcile;
pub mod watch;

pub use init::initializer;
pub use metrics::RouteMetrics;
pub use reconcile::{
    MAX_CONCURRENT_CONDITION_UPDATES, MAX_CONCURRENT_ROUTE_OPERATIONS, MIN_RECONCILIATION_PERIOD,
    RouteController, RouteError,
};

/// Default of `--route-reconciliation-period`.
pub const DEFAULT_RECONCILIATION_PERIOD: Duration = Duration::from_secs(10);
