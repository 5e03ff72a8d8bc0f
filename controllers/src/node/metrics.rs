//! The cloud-node controller's Prometheus metrics, under upstream's names and buckets so existing
//! dashboards keep working (upstream `controllers/node/metrics.go`).

use controller_manager::metrics::registered;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// How long Nodes wait for the cloud before they can take workloads.
#[derive(Clone, Debug)]
pub struct NodeMetrics {
    /// Node creation → uninitialized taint removed.
    pub taint_removal_delay: Histogram,
    /// Node creation → initialization finished.
    pub initial_node_sync_delay: Histogram,
}

fn buckets() -> impl Iterator<Item = f64> {
    // 1, 4, 16, 64, 256, 1024 seconds.
    exponential_buckets(1.0, 4.0, 6)
}

impl NodeMetrics {
    /// Creates the histograms and registers them in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Self::unregistered();
        Self {
            taint_removal_delay: registered(
                registry,
                "node_controller_cloud_provider_taint_removal_delay_seconds",
                "Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node.",
                metrics.taint_removal_delay,
            ),
            initial_node_sync_delay: registered(
                registry,
                "node_controller_initial_node_sync_delay_seconds",
                "Number of seconds after node creation when NodeController finished the initial synchronization of a single node.",
                metrics.initial_node_sync_delay,
            ),
        }
    }

    /// Histograms that are not exported, for callers without a registry (tests, embedders who
    /// do not scrape this controller).
    pub fn unregistered() -> Self {
        Self {
            taint_removal_delay: Histogram::new(buckets()),
            initial_node_sync_delay: Histogram::new(buckets()),
        }
    }
}

/// Seconds since the Node was created, or `None` when it has no creation timestamp.
pub fn seconds_since_creation(node: &Node, now: Timestamp) -> Option<f64> {
    let created = node.metadata.creation_timestamp.as_ref()?.0;
    Some(now.duration_since(created).as_secs_f64().max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn histograms_are_exported_with_upstream_names_and_buckets() {
        let mut registry = Registry::default();
        let m = NodeMetrics::new(&mut registry);
        m.taint_removal_delay.observe(3.0);
        let mut out = String::new();
        encode(&mut out, &registry).unwrap();
        assert!(out.contains(
            "node_controller_cloud_provider_taint_removal_delay_seconds_bucket{le=\"4.0\"} 1"
        ));
        assert!(out.contains(
            "node_controller_cloud_provider_taint_removal_delay_seconds_bucket{le=\"1.0\"} 0"
        ));
        assert!(
            out.contains("node_controller_initial_node_sync_delay_seconds_bucket{le=\"1024.0\"} 0")
        );
    }

    #[test]
    fn delay_is_measured_from_creation() {
        let created: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut n = Node::default();
        assert_eq!(seconds_since_creation(&n, created), None);
        n.metadata.creation_timestamp = Some(Time(created));
        let now: Timestamp = "2026-01-01T00:01:30Z".parse().unwrap();
        assert_eq!(seconds_since_creation(&n, now), Some(90.0));
    }
}
