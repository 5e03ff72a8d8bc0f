//! The cloud-node-lifecycle controller (upstream `cloud-node-lifecycle-controller`, alias
//! `cloud-node-lifecycle`): on every `--node-monitor-period` tick it looks at every Node in the
//! cache; Ready Nodes lose the shutdown taint, NotReady Nodes whose instance is gone are deleted,
//! and NotReady Nodes whose instance is shut down get the shutdown taint.
//!
//! The controller has no work queue and no event handlers (as upstream); the caller runs
//! [`NodeLifecycleController::monitor_nodes`] on a sliding period, first run immediately.
//!
//! | Module | Owns |
//! |---|---|
//! | [`cloud_state`] | existence and shutdown checks via InstancesV2 or Instances |
//! | [`grace`] | the deletion guard: consecutive "missing" answers over a grace period |
//! | [`taints`] | shutdown taint add/remove with GET + resourceVersion-carrying PATCH |
//!
//! # Safety differences from upstream
//! * **Deletion guard** ([`grace`]): upstream deletes a NotReady Node on the first "instance does
//!   not exist" answer; here the answer must repeat on [`DeletionGuard::missing_checks`]
//!   consecutive ticks spanning [`DeletionGuard::grace_period`] (defaults: 2 ticks, 30 s). An
//!   "exists" answer or the Node becoming Ready resets the count; a cloud error leaves it as is.
//!   This covers Nodes still carrying the uninitialized taint (upstream PR #124825) like all others.
//! * **Never delete a Ready Node**: Ready Nodes are never checked (as upstream), and right before
//!   deleting, the freshest cached copy is checked again: if it became Ready, or is a different
//!   Node (new UID) under the same name, nothing is deleted.
//! * **UID precondition**: the DELETE carries the UID, so a Node re-created under the same name
//!   between the check and the call is not deleted (upstream sends no preconditions). A 404 means
//!   someone else deleted it and is not reported as a failure.
//!
//! # Upstream behaviour → test
//!
//! | Behaviour (reference §3.2) | Test |
//! |---|---|
//! | Ready (missing condition = Unknown) | `tests::ready_status_defaults_to_unknown` |
//! | Ready ⇒ remove shutdown taint, no API call if absent | `taints::tests::removing_matches_key_and_effect_only`, `tests/node_lifecycle.rs::ready_node_loses_shutdown_taint_and_is_never_deleted` |
//! | Existence via V2 / V1 (provider ID lookup, InstanceNotFound ⇒ gone) | `tests/over_fake_cloud/node_cloud_state.rs::*` |
//! | Cloud error ⇒ skip node | `tests/node_lifecycle.rs::cloud_errors_skip_the_node` |
//! | Gone ⇒ `DeletingNode` event + DELETE (after the guard) | `grace::tests::*`, `tests/node_lifecycle.rs::gone_instance_is_deleted_after_the_grace_period`, `grace_period_holds_back_deletion` |
//! | Uninitialized Node gone ⇒ also guarded | `tests/node_lifecycle.rs::uninitialized_node_is_guarded_too_and_a_blip_resets_the_count` |
//! | Shut down ⇒ add `…/shutdown:NoSchedule`, replace a differing same key+effect taint | `taints::tests::adding_*`, `tests/node_lifecycle.rs::shutdown_instance_gets_taint` |
//! | V1 shutdown: InstanceNotFound / NotImplemented ⇒ false | `tests/over_fake_cloud/node_cloud_state.rs::v1_*` |
//! | Taint patch carries resourceVersion, retried on conflict (5 attempts) | `taints::tests::patch_carries_the_resource_version_and_replaces_the_list`, `tests/node_lifecycle.rs::taint_write_retries_conflicts_five_times` |
//! | Delete failure ⇒ `DeletingNodeFailed` (Warning) | `tests/node_lifecycle.rs::failed_delete_is_reported` |
//! | (ours) UID precondition protects a re-created Node | `tests/node_lifecycle.rs::node_recreated_under_the_same_name_is_not_deleted` |
//! | V1 existence by provider ID, lookup by name when the spec has none | `tests/node_lifecycle.rs::legacy_instances_path_deletes_by_provider_id` |

pub mod cloud_state;
pub mod grace;
mod init;
pub mod taints;

pub use init::initializer;

use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, Preconditions};
use parking_lot::Mutex;
use tokio::time::Instant;

pub use grace::{DeletionGuard, MissingTracker};
pub use taints::{SHUTDOWN_TAINT_KEY, shutdown_taint};

use crate::event_sink::{EventType, node_reference};
use crate::names::cloud_node_lifecycle::CONTROLLER_NAME;
use crate::node_parts::NodeParts;
use crate::retry::is_not_found;
use cloud_state::{instance_exists, instance_shutdown};
use taints::{add_or_update_taint_on_node, remove_taint_off_node};

/// The `Ready` condition's status, `Unknown` when the Node reports none (as upstream).
pub fn ready_status(node: &Node) -> &str {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map_or("Unknown", |c| c.status.as_str())
}

/// Deletes Nodes whose instances are gone and marks shut-down instances, so the cluster's view of
/// machines follows the cloud's (upstream `CloudNodeLifecycleController`).
pub struct NodeLifecycleController {
    parts: NodeParts,
    tracker: Mutex<MissingTracker>,
}

impl NodeLifecycleController {
    /// Builds the controller over `parts` (a cloud with an instances facet), deleting Nodes only
    /// past `guard`.
    pub fn new(parts: NodeParts, guard: DeletionGuard) -> Self {
        Self {
            parts,
            tracker: Mutex::new(MissingTracker::new(guard)),
        }
    }

    /// One tick (upstream `MonitorNodes`): every cached Node, one after the other. Errors are
    /// logged per Node; the next tick tries again.
    #[tracing::instrument(skip(self), fields(controller = CONTROLLER_NAME))]
    pub async fn monitor_nodes(&self) {
        let nodes = self.parts.lister.list();
        self.tracker.lock().retain(|name| {
            nodes
                .iter()
                .any(|n| n.metadata.name.as_deref() == Some(name))
        });
        for node in &nodes {
            self.monitor_node(node).await;
        }
    }

    async fn monitor_node(&self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if ready_status(node) == "True" {
            self.tracker.lock().forget(name);
            if let Err(err) = remove_taint_off_node(&self.parts.api, node, &shutdown_taint()).await
            {
                tracing::error!(node = name, error = %err, "failed to remove the shutdown taint");
            }
            return;
        }
        let exists = match instance_exists(&*self.parts.cloud, node).await {
            Ok(exists) => exists,
            Err(err) => {
                tracing::error!(node = name, error = %err, "error checking if node exists");
                return;
            }
        };
        if !exists {
            let uid = node.metadata.uid.as_deref();
            let may_delete = self
                .tracker
                .lock()
                .observe_missing(name, uid, Instant::now());
            if may_delete {
                self.delete_node(node).await;
            } else {
                tracing::info!(
                    node = name,
                    "cloud reports the instance missing; waiting for the grace period before deleting"
                );
            }
            return;
        }
        self.tracker.lock().forget(name);
        match instance_shutdown(&*self.parts.cloud, node).await {
            Ok(true) => {
                if let Err(err) =
                    add_or_update_taint_on_node(&self.parts.api, name, &shutdown_taint()).await
                {
                    tracing::error!(node = name, error = %err,
                        "failed to apply the shutdown taint; the node may have been deleted");
                }
            }
            Ok(false) => {}
            Err(err) => {
                tracing::error!(node = name, error = %err, "error checking if node is shut down");
            }
        }
    }

    async fn delete_node(&self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let still_same_and_not_ready = self.parts.lister.get(name).is_some_and(|current| {
            current.metadata.uid == node.metadata.uid && ready_status(&current) != "True"
        });
        if !still_same_and_not_ready {
            tracing::info!(node = name, "node changed since the check; not deleting");
            self.tracker.lock().forget(name);
            return;
        }
        tracing::info!(
            node = name,
            "deleting node since it is no longer present in cloud provider"
        );
        let reference = node_reference(node);
        self.parts.events.emit(
            &reference,
            EventType::Normal,
            "DeletingNode",
            &format!("Deleting node {name} because it does not exist in the cloud provider"),
        );
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: node.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self.parts.api.delete(name, &params).await {
            Ok(_) => self.tracker.lock().forget(name),
            Err(err) if is_not_found(&err) => self.tracker.lock().forget(name),
            Err(err) => {
                tracing::error!(node = name, error = %err, "unable to delete node");
                self.parts.events.emit(
                    &reference,
                    EventType::Warning,
                    "DeletingNodeFailed",
                    &format!("Failed to delete node {name}: {err}"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};

    /// Compile-time check: a tick can be spawned on a multi-threaded runtime.
    #[allow(dead_code)]
    fn monitor_future_is_send(c: &NodeLifecycleController) {
        fn assert_send<T: Send>(_: T) {}
        assert_send(c.monitor_nodes());
    }

    #[test]
    fn ready_status_defaults_to_unknown() {
        let mut n = Node::default();
        assert_eq!(ready_status(&n), "Unknown");
        n.status = Some(NodeStatus {
            conditions: Some(vec![
                NodeCondition {
                    type_: "MemoryPressure".into(),
                    status: "True".into(),
                    ..Default::default()
                },
                NodeCondition {
                    type_: "Ready".into(),
                    status: "False".into(),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        });
        assert_eq!(ready_status(&n), "False");
    }
}
