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
//! period on a non-sliding schedule. The alpha watch-based mode (KEP-5237) is the lead's wiring of
//! [`RouteController::reconcile_node_routes`] to a one-key queue.
//!
//! # Differences from upstream
//! - `--cluster-cidr` errors are actionable messages instead of a terse fatal exit.
//! - The `FailedToCreateRoute` event references the Node by its real UID (upstream puts the node
//!   name in the UID field).
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

pub mod cidrs;
pub mod condition;
pub mod metrics;
pub mod plan;
mod reconcile;

pub use metrics::RouteMetrics;
pub use reconcile::{MAX_CONCURRENT_ROUTE_OPERATIONS, RouteController, RouteError};
