//! The cloud-node controller's reconcile (`sync_node`), its periodic address refresh
//! (`update_node_status`) and its event-to-key mapping; everything else in `node/` is the pure
//! logic these call.

use std::sync::Arc;
use std::time::Duration;

use controller_manager::informer::ObjectKey;
use controller_manager::shard::Ring;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use tokio_util::sync::CancellationToken;

use super::addresses::{AddressError, update_node_address};
use super::has_uninitialized_taint;
use super::init_patch::init_patch;
use super::labels::reconcile_node_labels;
use super::metadata::{MetadataError, instance_addresses, instance_metadata};
use super::metrics::{NodeMetrics, seconds_since_creation};
use super::modifiers::NodeModifiers;
use crate::event_sink::{EventType, node_reference};
use crate::names::cloud_node::CONTROLLER_NAME;
use crate::node_parts::NodeParts;
use crate::retry::{
    UPDATE_NODE_SPEC_BACKOFF, is_conflict_or_test_failed, is_not_found, retry_on_conflict,
};

/// Why one sync failed; the key is requeued with rate limiting (or after
/// [`NodeSyncError::retry_after`] when the cloud asked for a fixed delay).
#[derive(Debug, thiserror::Error)]
pub enum NodeSyncError {
    /// The cloud could not describe the instance.
    #[error("failed to get instance metadata for node {node}: {source}")]
    Metadata {
        /// The Node's name.
        node: String,
        /// What went wrong.
        source: MetadataError,
    },
    /// kubelet's `--node-ip` matches no cloud address; fix the flag or the cloud's addresses.
    #[error("provided node ip for node {node} is not valid: {source}")]
    InvalidNodeIp {
        /// The Node's name.
        node: String,
        /// What went wrong.
        source: AddressError,
    },
    /// Writing the initialized Node failed (after conflict retries).
    #[error("failed to update node {node}: {source}")]
    Update {
        /// The Node's name.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// Writing the GA twins of beta labels failed.
    #[error("failed to reconcile labels of node {node}: {source}")]
    Labels {
        /// The Node's name.
        node: String,
        /// The API error.
        source: kube::Error,
    },
}

impl crate::wiring::RetryHint for NodeSyncError {
    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            NodeSyncError::Metadata { source, .. } => source.retry_after(),
            _ => None,
        }
    }
}

/// Initializes Nodes registered by kubelets running with `--cloud-provider=external` and keeps
/// their addresses current (upstream `CloudNodeController`).
pub struct NodeController {
    parts: NodeParts,
    metrics: NodeMetrics,
    /// The ring when cloud-node runs sharded: the address refresh touches admitted Nodes only.
    shard: Option<Ring>,
}

impl NodeController {
    /// Builds the controller over `parts` (a cloud with an instances facet).
    pub fn new(parts: NodeParts, metrics: NodeMetrics) -> Self {
        Self {
            parts,
            metrics,
            shard: None,
        }
    }

    /// Runs sharded in `ring`: the periodic address refresh visits only the Nodes the ring
    /// admits here (the workers are gated by a [`controller_manager::shard::ShardLayer`]).
    pub fn with_shard(mut self, ring: Option<Ring>) -> Self {
        self.shard = ring;
        self
    }

    /// Reconciles one Node (upstream `syncNode`): initialized Nodes only get their GA labels
    /// reconciled; Nodes with the uninitialized taint get provider ID, labels and addresses from
    /// the cloud and lose the taint.
    ///
    /// A Node that disappears from the cache or the API while this runs ends the sync
    /// successfully (upstream returns an error and finds the Node gone on the retry).
    #[tracing::instrument(skip(self), fields(controller = CONTROLLER_NAME))]
    pub async fn sync_node(&self, name: &str) -> Result<(), NodeSyncError> {
        let Some(node) = self.parts.lister.get(name) else {
            return Ok(());
        };
        if !has_uninitialized_taint(&node) {
            return reconcile_node_labels(&self.parts.api, &node)
                .await
                .map_err(|source| NodeSyncError::Labels {
                    node: name.to_string(),
                    source,
                });
        }
        let metadata = match instance_metadata(&*self.parts.cloud, &node).await {
            Ok(Some(metadata)) => metadata,
            Ok(None) => {
                tracing::info!(
                    node = name,
                    "skipping node sync because the cloud provided no metadata"
                );
                return Ok(());
            }
            Err(source) => {
                return Err(NodeSyncError::Metadata {
                    node: name.to_string(),
                    source,
                });
            }
        };
        let modifiers =
            NodeModifiers::new(&node, metadata).map_err(|source| NodeSyncError::InvalidNodeIp {
                node: name.to_string(),
                source,
            })?;

        // The first attempt works from the cache; a retry (the taints changed meanwhile) from
        // a fresh read, since the cache may not have caught up with the change yet.
        let attempts = std::sync::atomic::AtomicUsize::new(0);
        let updated = retry_on_conflict(
            UPDATE_NODE_SPEC_BACKOFF,
            is_conflict_or_test_failed,
            || async {
                let fresh = attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed) > 0;
                let current = if fresh {
                    match self.parts.api.get_opt(name).await? {
                        Some(node) => Arc::new(node),
                        None => return Ok(None),
                    }
                } else {
                    match self.parts.lister.get(name) {
                        Some(node) => node,
                        None => return Ok(None),
                    }
                };
                let mut new = (*current).clone();
                modifiers.apply(&mut new);
                let ops = init_patch(&current, &new);
                if ops.is_empty() {
                    return Ok(Some((*current).clone()));
                }
                let ops: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops))
                    .map_err(kube::Error::SerdeError)?;
                match self
                    .parts
                    .api
                    .patch(name, &PatchParams::default(), &Patch::Json::<()>(ops))
                    .await
                {
                    Ok(stored) => Ok(Some(stored)),
                    Err(err) if is_not_found(&err) => Ok(None),
                    Err(err) => Err(err),
                }
            },
        )
        .await
        .map_err(|source| NodeSyncError::Update {
            node: name.to_string(),
            source,
        })?;
        let Some(updated) = updated else {
            tracing::info!(node = name, "node disappeared during initialization");
            return Ok(());
        };
        if let Some(delay) = seconds_since_creation(&updated, jiff::Timestamp::now()) {
            self.metrics.taint_removal_delay.observe(delay);
        }
        update_node_address(
            &self.parts.api,
            &updated,
            &modifiers.metadata().node_addresses,
        )
        .await;
        tracing::info!(
            node = name,
            "successfully initialized node with cloud provider"
        );

        self.parts.events.emit(
            &node_reference(&node),
            EventType::Normal,
            "Synced",
            "Node synced successfully",
        );
        if let Some(delay) = seconds_since_creation(&node, jiff::Timestamp::now()) {
            self.metrics.initial_node_sync_delay.observe(delay);
        }
        Ok(())
    }

    /// One pass of the periodic address refresh (upstream `UpdateNodeStatus`): for every
    /// initialized Node in the cache, at most `concurrency` at a time, fetch its addresses from the
    /// cloud and patch them if they changed. Errors are logged per Node; the next pass retries.
    pub async fn update_node_status(&self, concurrency: usize) {
        self.update_node_status_over(concurrency, Duration::ZERO, &CancellationToken::new())
            .await;
    }

    /// [`Self::update_node_status`] with Node `i` of `n` started at `i × spread / n` (see
    /// `refresh.rs`), starting no further Node once `stop` is cancelled.
    #[tracing::instrument(skip(self, stop), fields(controller = CONTROLLER_NAME))]
    pub async fn update_node_status_over(
        &self,
        concurrency: usize,
        spread: Duration,
        stop: &CancellationToken,
    ) {
        let mut nodes = self.parts.lister.list();
        nodes.retain(|node| !has_uninitialized_taint(node));
        if let Some(ring) = &self.shard {
            nodes.retain(|node| ring.owns(&ObjectKey::from_object(&**node)));
        }
        super::pacing::paced(nodes, spread, stop)
            .for_each_concurrent(concurrency.max(1), |node| self.refresh_addresses(node))
            .await;
    }

    async fn refresh_addresses(&self, node: Arc<Node>) {
        let Some(ring) = &self.shard else {
            return self.refresh_node_addresses(&node).await;
        };
        // Sharded: skipped (until the next pass) unless admitted now, and dropped if the
        // replica loses its membership meanwhile.
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let Some(admitted) = ring.admit(&ObjectKey::cluster(name)) else {
            return;
        };
        tokio::select! {
            biased;
            () = admitted.lost().cancelled() => {}
            () = self.refresh_node_addresses(&node) => {}
        }
    }

    async fn refresh_node_addresses(&self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        match instance_addresses(&*self.parts.cloud, node).await {
            Ok(Some(addresses)) => {
                update_node_address(&self.parts.api, node, &addresses).await;
            }
            Ok(None) => {
                tracing::debug!(node = name, "cloud provided no metadata; addresses kept");
            }
            Err(err) => {
                tracing::error!(node = name, error = %err, "failed to get node addresses from the cloud");
            }
        }
    }
}

/// A Node informer notification, as the controller's event handler sees it.
#[derive(Clone, Copy, Debug)]
pub enum NodeEvent<'a> {
    /// A Node appeared (or the initial list delivered it).
    Added(&'a Node),
    /// A Node changed, or a resync re-delivered it.
    Updated {
        /// The cached object before the change.
        old: &'a Node,
        /// The object after the change.
        new: &'a Node,
    },
    /// A Node was deleted.
    Deleted(&'a Node),
}

/// The work-queue key an event enqueues: the Node's name on add and on every update (including
/// resyncs, so label reconciliation and retried initialization happen without a watch change);
/// nothing on delete, as upstream registers no delete handler.
pub fn node_key_for_event(event: &NodeEvent<'_>) -> Option<String> {
    match event {
        NodeEvent::Added(node) | NodeEvent::Updated { new: node, .. } => node.metadata.name.clone(),
        NodeEvent::Deleted(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n
    }

    /// Compile-time check: the reconcile futures can be spawned on a multi-threaded runtime.
    #[allow(dead_code)]
    fn futures_are_send(c: &NodeController) {
        fn assert_send<T: Send>(_: T) {}
        assert_send(c.sync_node("x"));
        assert_send(c.update_node_status(1));
    }

    #[test]
    fn add_and_update_enqueue_the_node_name_delete_enqueues_nothing() {
        let (a, b) = (named("a"), named("b"));
        assert_eq!(node_key_for_event(&NodeEvent::Added(&a)), Some("a".into()));
        assert_eq!(
            node_key_for_event(&NodeEvent::Updated { old: &a, new: &b }),
            Some("b".into())
        );
        assert_eq!(node_key_for_event(&NodeEvent::Deleted(&a)), None);
    }
}
