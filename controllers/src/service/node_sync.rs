//! Node-triggered backend updates: when the eligible node set changes, every load-balanced
//! Service gets `UpdateLoadBalancer` with the new set (upstream `syncNodes`, `nodeSyncService`,
//! `lockedUpdateLoadBalancerHosts`). A Service whose update fails is handed back for a full sync.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use tokio::time::Instant;

use super::ServiceController;
use super::predicates::{
    filter_lb_nodes, nodes_sufficiently_equal, should_sync_updated_node, wants_load_balancer,
};
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

impl ServiceController {
    /// Whether a Node Add/Update/Delete should trigger a node sync: Add (`old == None`) and Delete
    /// (`new == None`) always do, an Update only per [`should_sync_updated_node`].
    pub fn node_event_triggers(old: Option<&Node>, new: Option<&Node>) -> bool {
        match (old, new) {
            (Some(old), Some(new)) => should_sync_updated_node(old, new),
            _ => true,
        }
    }

    /// One full node-sync pass over every Service last processed, `workers` at a time; returns
    /// the keys of Services whose backends could not be updated, for a full `sync_service`.
    pub async fn sync_nodes(&self, workers: usize) -> Vec<String> {
        let start = Instant::now();
        let services: Vec<(String, Arc<Service>)> = self
            .service_cache
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let total = services.len();
        let mut retry: Vec<String> = futures::stream::iter(services)
            .map(|(key, svc)| async move {
                let ok = self.node_sync_service(&key, &svc).await;
                (!ok).then_some(key)
            })
            .buffer_unordered(workers.max(1))
            .filter_map(futures::future::ready)
            .collect()
            .await;
        retry.sort();
        let latency = start.elapsed().as_secs_f64();
        self.metrics.nodesync_latency.observe(latency);
        tracing::debug!(
            services = total,
            retry = retry.len(),
            latency,
            "node sync finished"
        );
        retry
    }

    /// `true` on success (or nothing to do), `false` when the Service must be retried.
    async fn node_sync_service(&self, key: &str, svc: &Service) -> bool {
        if !wants_load_balancer(svc) {
            return true;
        }
        let new_nodes = filter_lb_nodes(&self.nodes.list());
        // Stored before the cloud call whatever its outcome: a failure is retried through a full
        // service sync, which stores its own set.
        let old_nodes = self
            .last_synced_nodes
            .lock()
            .insert(key.to_string(), new_nodes.clone())
            .unwrap_or_default();
        let old_nodes = filter_lb_nodes(&old_nodes);
        if nodes_sufficiently_equal(&old_nodes, &new_nodes) {
            return true;
        }
        let Ok(lb) = self.lb() else {
            // Unreachable: `new` refuses a cloud without load balancers.
            return false;
        };
        match self.update_load_balancer_hosts(lb, svc, &new_nodes).await {
            Ok(()) => true,
            Err(err) => {
                tracing::warn!(service = key, error = %err, "failed to update load balancer hosts");
                self.metrics.nodesync_error.inc();
                false
            }
        }
    }

    async fn update_load_balancer_hosts(
        &self,
        lb: &dyn LoadBalancer,
        svc: &Service,
        hosts: &[Arc<Node>],
    ) -> Result<(), CloudError> {
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
                return Ok(());
            }
            Err(CloudError::ImplementedElsewhere) => return Ok(()),
            Err(err) => err,
        };
        // Only an error if the load balancer still exists.
        match lb.get_load_balancer(&self.cluster_name, svc).await {
            Ok(None) => return Ok(()),
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
