//! The cloud-node controller (upstream `cloud-node-controller`, alias `cloud-node`): initializes
//! Nodes that kubelet registered with the `node.cloudprovider.kubernetes.io/uninitialized` taint
//! from the cloud's instance metadata, keeps their addresses current, and copies deprecated beta
//! topology labels to their GA twins.
//!
//! The controller is framework-agnostic: it reads Nodes through a [`NodeLister`] (the shared
//! informer's store in production) and is driven by whoever owns the work queue:
//! [`node_key_for_event`] maps informer events to keys, [`NodeController::sync_node`] reconciles
//! one key, and [`NodeController::update_node_status`] is one pass of the periodic address loop.
//!
//! | Module | Owns |
//! |---|---|
//! | [`metadata`] | instance metadata via InstancesV2, or Instances + Zones with every fallback |
//! | [`modifiers`] | provider ID, labels and beta twins, additional-label filter, taint removal |
//! | [`addresses`] | provided-node-ip rules, hostname retention, change detection, status patch |
//! | [`labels`] | beta→GA label reconciliation for initialized Nodes |
//! | [`sync`] | `sync_node`, `update_node_status`, event→key mapping |
//! | `refresh` | the periodic address refresh task, its calls spread over the period |
//! | [`metrics`] | the two upstream histograms |
//!
//! # Upstream behaviour → test
//!
//! | Behaviour (reference §3.1) | Test |
//! |---|---|
//! | Add/Update enqueue the name, no Delete handler | `sync::tests::add_and_update_enqueue_the_node_name_delete_enqueues_nothing` |
//! | Node missing from the cache ⇒ done | `tests/node_sync.rs::missing_node_is_done` |
//! | Initialized Node ⇒ only beta→GA labels | `labels::tests::*`, `tests/node_sync.rs::initialized_node_gets_ga_labels_only` |
//! | V2 metadata; `None` ⇒ taint stays, success | `tests/over_fake_cloud/node_metadata.rs::v2_*`, `tests/node_sync.rs::nil_metadata_leaves_taint` |
//! | V2 without provider ID ⇒ error, taint stays | `tests/over_fake_cloud/node_metadata.rs::v2_without_provider_id_falls_back_to_the_node_or_fails`, `tests/node_sync.rs::node_that_never_gets_a_provider_id_keeps_taint` |
//! | V1: `<provider>://<id>`, NotImplemented ⇒ empty ID, other errors fail | `tests/over_fake_cloud/node_metadata.rs::v1_*` |
//! | V1 by-provider-ID lookups with by-name fallbacks; both failing ⇒ error | `tests/over_fake_cloud/node_metadata.rs::v1_falls_back_to_name_lookups`, `tests/over_fake_cloud/node_metadata.rs::v1_both_lookups_failing_is_an_error` |
//! | Provider ID set only when empty | `modifiers::tests::provider_id_is_set_once_and_never_overwritten` |
//! | GA + beta labels for type, zone, region | `modifiers::tests::cloud_labels_set_ga_and_beta_twins_and_skip_empty_values` |
//! | Additional labels: `(^|\.)(kubernetes\|k8s)\.io/` dropped, existing kept | `modifiers::tests::reserved_label_keys_match_the_upstream_regex`, `additional_labels_are_filtered_and_never_overwrite` |
//! | Every uninitialized taint removed | `modifiers::tests::every_uninitialized_taint_is_removed_and_others_kept` |
//! | Invalid provided node IP ⇒ sync fails, taint stays | `modifiers::tests::modifiers_are_idempotent_and_validate_the_node_ip`, `tests/node_sync.rs::invalid_provided_node_ip_keeps_taint_and_valid_one_orders_addresses` |
//! | PUT loop re-reads the cache, retries 409 (here: a JSON patch testing only the taints, so a stale cache costs no 409; a changed taint list retries over a fresh GET) | `crate::retry::tests::*`, `init_patch::tests::tests_the_taints_and_adds_only_what_changed`, `tests/node_sync.rs::a_stale_cache_costs_no_conflict`, `tests/node_sync.rs::changed_taints_are_retried_over_a_fresh_read` |
//! | Immediate address update, Synced event | `tests/node_sync.rs::initializes_node_end_to_end` |
//! | Provided node IP parsing and matching | `addresses::tests::parses_*`, `rejects_*`, `node_ip_*` |
//! | Hostname retention | `addresses::tests::hostname_is_kept_when_the_cloud_reports_none` |
//! | Change detection quirks | `addresses::tests::change_detection_matches_upstream_quirks` |
//! | Status patch: `$patch: replace` over a non-empty list, a plain merge by `type` over an empty one | `addresses::tests::{status_patch_replaces_a_non_empty_list_whole, status_patch_over_an_empty_list_carries_no_directive}`, `tests/node_sync.rs::{periodic_refresh_updates_addresses, address_less_node_gets_exactly_the_cloud_addresses}` |
//! | Periodic loop skips uninitialized Nodes, guards V2 `None` | `tests/node_sync.rs::periodic_refresh_updates_addresses` |
//! | Metrics names and buckets | `metrics::tests::*` |
//! | Node deleted between cache read and PUT | `tests/node_sync.rs::node_deleted_mid_sync_ends_quietly` |
//! | Cloud errors (incl. retry-after, unknown instance) ⇒ error, taint stays, no deletion | `tests/node_sync.rs::cloud_errors_keep_the_taint_and_carry_retry_after` |
//! | Legacy Instances + Zones initialization | `tests/node_sync.rs::legacy_instances_and_zones_path` |
//!
//! # Differences from upstream
//! * Over an empty address list, a new list that names one type twice (dual-stack InternalIPs)
//!   is sent as a JSON merge patch: upstream's merge by `type` would fold the two into one (see
//!   [`addresses`]).
//! * A Node that vanishes from the cache or the API during initialization ends the sync without
//!   an error instead of one extra failed attempt.
//! * The periodic loop skips a V2 provider's `None` metadata instead of dereferencing it.
//! * The periodic loop spreads one pass's cloud calls evenly over `--node-status-update-frequency`
//!   (Node `i` of `n` at `i × period / n`, on a non-sliding period) instead of calling for every
//!   Node back to back; each Node is still refreshed once per period.

pub mod addresses;
mod init;
pub mod init_patch;
pub mod labels;
pub mod metadata;
pub mod metrics;
pub mod modifiers;
mod pacing;
mod refresh;
pub mod sync;

pub use init::initializer;

use k8s_openapi::api::core::v1::Node;

pub use crate::listers::{MemoryNodeLister, NodeLister};
pub use metrics::NodeMetrics;
pub use sync::{NodeController, NodeEvent, NodeSyncError, node_key_for_event};

/// Taint kubelet registers with `--cloud-provider=external`; the node controller removes it once
/// the Node is initialized from the cloud.
pub const UNINITIALIZED_TAINT_KEY: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Annotation kubelet sets from `--node-ip` when the cloud provider is external.
pub const PROVIDED_NODE_IP_ANNOTATION: &str = "alpha.kubernetes.io/provided-node-ip";

/// Whether kubelet's uninitialized taint (any value or effect) is still on the Node.
pub fn has_uninitialized_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED_TAINT_KEY))
}
