//! Node-triggered backend updates, one load balancer at a time: when the eligible node set
//! changes, each load-balanced Service gets `UpdateLoadBalancer` with the set as it is when its
//! turn comes (upstream `nodeSyncService`, `lockedUpdateLoadBalancerHosts`). The set recorded
//! per Service is only ever one the cloud accepted, so a failed, timed-out or cancelled update
//! is always tried again; the caller retries a failed key with backoff.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};
use tokio::time::Instant;

use super::ServiceController;
use super::error::UpdateHostsError;
use super::node_set::EligibleNodes;
use super::predicates::{should_sync_updated_node, wants_load_balancer};
use crate::cloud::{CloudError, LoadBalancer};
use crate::event_sink::EventType;

/// How many node names an `UpdateLoadBalancerFailed` event lists before eliding the rest.
const MAX_NODE_NAMES_IN_EVENT: usize = 20;

/// Node names for an event message, at most [`MAX_NODE_NAMES_IN_EVENT`] then `<N more>`.
fn loggable_node_names(nodes: &[Arc<Node>]) -> String {
    let mut names: Vec<String> = nodes
        .iter()
        .take(MAX_NODE_NAMES_IN_EVENT)
        .map(|n| n.metadata.name.clone().unwrap_or_default())
        .collect();
    if nodes.len() > MAX_NODE_NAMES_IN_EVENT {
        names.push(format!("<{} more>", nodes.len() - MAX_NODE_NAMES_IN_EVENT));
    }
    format!("[{}]", names.join(" "))
}

/// What the cloud said to a host update.
enum HostsUpdate {
    /// The load balancer now has these hosts (or another controller implements it).
    Accepted,
    /// The update failed but the load balancer does not exist: nothing to keep in step.
    Gone,
}

/// How many quota refusals of one update are waited out in place before the key is requeued.
const RETRIES_IN_PLACE: u32 = 5;
/// The longest `after` waited out in place: a longer one is the cloud asking for a real pause,
/// and holding a worker and the Service's lock through it would stall its ensure.
const MAX_WAIT_IN_PLACE: std::time::Duration = std::time::Duration::from_secs(1);

impl ServiceController {
    /// Whether a Node Add/Update/Delete should trigger a node sync: Add (`old == None`) and Delete
    /// (`new == None`) always do, an Update only per [`should_sync_updated_node`].
    pub fn node_event_triggers(old: Option<&Node>, new: Option<&Node>) -> bool {
        match (old, new) {
            (Some(old), Some(new)) => should_sync_updated_node(old, new),
            _ => true,
        }
    }

    /// The keys a node sync visits: every Service last processed that wants a load balancer
    /// (upstream takes them from its service cache, not the lister). `first_change` is when the
    /// node change being answered happened; each key keeps its earliest unanswered one, from
    /// which `service_controller_nodesync_latency_seconds` is measured.
    pub fn node_sync_keys_since(&self, first_change: Instant) -> Vec<String> {
        let mut keys: Vec<String> = self
            .service_cache
            .lock()
            .iter()
            .filter(|(_, svc)| wants_load_balancer(svc))
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        let mut since = self.node_change_since.lock();
        for key in &keys {
            since.entry(key.clone()).or_insert(first_change);
        }
        keys
    }

    /// The Service's load balancer holds the node set: observe how long that took.
    fn node_sync_done(&self, key: &str) {
        if let Some(since) = self.node_change_since.lock().remove(key) {
            self.metrics
                .nodesync_latency
                .observe(since.elapsed().as_secs_f64());
        }
    }

    /// Brings the backends of Service `key`'s load balancer to the current eligible node set, if
    /// they differ from the last set the cloud accepted. Never runs beside an ensure of the same
    /// Service (they share a per-Service lock), so the recorded set is the cloud's.
    pub async fn sync_load_balancer_hosts(&self, key: &str) -> Result<(), UpdateHostsError> {
        let Some(svc) = self.service_cache.lock().get(key).cloned() else {
            // Deleted since the node sync was queued: its own sync cleans up.
            self.node_change_since.lock().remove(key);
            return Ok(());
        };
        if !wants_load_balancer(&svc) {
            self.node_change_since.lock().remove(key);
            return Ok(());
        }
        let lock = self.lb_lock(key);
        let _serialized = lock.lock().await;
        let Some(new_nodes) = self.hosts_to_sync(key) else {
            self.node_sync_done(key);
            return Ok(());
        };
        // `new` refuses a cloud without load balancers, so this cannot fail.
        let lb = self
            .lb()
            .map_err(|_| UpdateHostsError(CloudError::NotImplemented))?;
        // A refusal for the quota (`Retry { after }`, up to a second) is retried here, holding
        // this key's place: requeued, it would wait behind load balancers that already hold the
        // joined Nodes and spend the quota on them, pass after pass, while this one holds none.
        // Shutdown ends the wait: the key goes back to the queue, which is stopping.
        let mut new_nodes = new_nodes;
        let mut refusals = 0;
        let result = loop {
            let result = self
                .update_load_balancer_hosts(lb, &svc, new_nodes.nodes())
                .await;
            let after = match &result {
                Err(err) if refusals < RETRIES_IN_PLACE => err
                    .retry_after()
                    .filter(|after| *after <= MAX_WAIT_IN_PLACE),
                _ => None,
            };
            let Some(after) = after else { break result };
            refusals += 1;
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => break result,
                () = tokio::time::sleep(after) => {}
            }
            match self.hosts_to_sync(key) {
                Some(latest) => new_nodes = latest,
                None => {
                    // In step meanwhile (an ensure passed the set): nothing left to do.
                    self.node_sync_done(key);
                    return Ok(());
                }
            }
        };
        match result {
            Ok(HostsUpdate::Accepted | HostsUpdate::Gone) => {
                // Gone: any later ensure passes the node set of its own time and records it.
                self.last_synced_nodes
                    .lock()
                    .insert(key.to_string(), new_nodes);
                self.node_sync_done(key);
                Ok(())
            }
            Err(err) => {
                tracing::warn!(service = key, error = %err, "failed to update load balancer hosts");
                self.metrics.nodesync_error.inc();
                Err(UpdateHostsError(err))
            }
        }
    }

    /// The current eligible node set, if it is not sufficiently equal to the one the cloud last
    /// accepted for `key`. `None` too for a load balancer this process has not ensured yet: it
    /// may not exist, and its ensure, queued or running, passes the node set of its own time.
    /// O(1) when the Node cache did not change since the last call (see `node_set`).
    fn hosts_to_sync(&self, key: &str) -> Option<Arc<EligibleNodes>> {
        let old_nodes = self.last_synced_nodes.lock().get(key)?.clone();
        let new_nodes = self.eligible_nodes();
        (!old_nodes.same_for_the_cloud(&new_nodes)).then_some(new_nodes)
    }

    async fn update_load_balancer_hosts(
        &self,
        lb: &dyn LoadBalancer,
        svc: &Service,
        hosts: &[Arc<Node>],
    ) -> Result<HostsUpdate, CloudError> {
        self.metrics.loadbalancer_sync.inc();
        let start = Instant::now();
        let result = lb
            .update_load_balancer(&self.cluster_name, svc, hosts)
            .await;
        self.metrics
            .update_host_latency
            .observe(start.elapsed().as_secs_f64());
        let err = match result {
            Ok(()) => {
                if hosts.is_empty() {
                    self.event(
                        svc,
                        EventType::Warning,
                        "UnAvailableLoadBalancer",
                        "There are no available nodes for LoadBalancer",
                    );
                } else {
                    self.event(
                        svc,
                        EventType::Normal,
                        "UpdatedLoadBalancer",
                        "Updated load balancer with new hosts",
                    );
                }
                return Ok(HostsUpdate::Accepted);
            }
            Err(CloudError::ImplementedElsewhere) => return Ok(HostsUpdate::Accepted),
            Err(err) => err,
        };
        // Only an error if the load balancer still exists. A 429 says nothing about that, and
        // asking would spend the quota the cloud just said is used up.
        let existence = if err.retry_after().is_some() {
            Ok(Some(Default::default()))
        } else {
            lb.get_load_balancer(&self.cluster_name, svc).await
        };
        match existence {
            Ok(None) => return Ok(HostsUpdate::Gone),
            Ok(Some(_)) => {}
            Err(get_err) => {
                tracing::warn!(error = %get_err, "failed to check if load balancer exists");
            }
        }
        self.event(
            svc,
            EventType::Warning,
            "UpdateLoadBalancerFailed",
            &format!(
                "Error updating load balancer with new hosts {} [node names limited, total number of nodes: {}], error: {err}",
                loggable_node_names(hosts),
                hosts.len()
            ),
        );
        Err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> Arc<Node> {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        Arc::new(n)
    }

    #[test]
    fn node_names_are_limited() {
        let few: Vec<_> = ["a", "b"].iter().map(|n| node(n)).collect();
        assert_eq!(loggable_node_names(&few), "[a b]");
        let many: Vec<_> = (0..23).map(|i| node(&format!("n{i}"))).collect();
        let text = loggable_node_names(&many);
        assert!(text.starts_with("[n0 n1 "), "{text}");
        assert!(text.ends_with(" n19 <3 more>]"), "{text}");
        assert!(!text.contains("n20"), "{text}");
    }

    #[test]
    fn node_event_triggers_table() {
        let a = Node::default();
        let mut excluded = Node::default();
        excluded.metadata.labels = Some(
            [(
                super::super::predicates::EXCLUDE_FROM_LOAD_BALANCERS_LABEL.to_string(),
                "true".to_string(),
            )]
            .into(),
        );
        assert!(ServiceController::node_event_triggers(None, Some(&a)));
        assert!(ServiceController::node_event_triggers(Some(&a), None));
        assert!(!ServiceController::node_event_triggers(Some(&a), Some(&a)));
        assert!(ServiceController::node_event_triggers(
            Some(&a),
            Some(&excluded)
        ));
    }
}
