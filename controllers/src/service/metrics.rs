//! The service controller's Prometheus metrics, under the upstream names so existing dashboards
//! keep working (kubernetes/cloud-provider `controllers/service/metrics.go`).

use controller_manager::metrics::registered;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Handles to the service controller's metrics; cheap to clone (shared counters inside).
#[derive(Clone, Debug)]
pub struct ServiceMetrics {
    /// `service_controller_loadbalancer_sync_total`: node-triggered `UpdateLoadBalancer` attempts.
    pub loadbalancer_sync: Counter,
    /// `service_controller_nodesync_error_total`: services whose node sync failed.
    pub nodesync_error: Counter,
    /// `service_controller_nodesync_latency_seconds`: from a node change to a load balancer
    /// holding the resulting node set (one observation per load balancer).
    pub nodesync_latency: Histogram,
    /// `service_controller_update_loadbalancer_host_latency_seconds`: one `UpdateLoadBalancer`.
    pub update_host_latency: Histogram,
}

fn latency_histogram() -> Histogram {
    // Upstream: ExponentialBuckets(1, 2, 15), i.e. 1 s .. 16384 s.
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

impl Default for ServiceMetrics {
    /// Unregistered metrics, for tests and for embedders that do not export them.
    fn default() -> Self {
        Self {
            loadbalancer_sync: Counter::default(),
            nodesync_error: Counter::default(),
            nodesync_latency: latency_histogram(),
            update_host_latency: latency_histogram(),
        }
    }
}

impl ServiceMetrics {
    /// Creates the metrics and registers them in `registry` under the upstream names.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        // prometheus-client appends `_total` to counters when encoding.
        Self {
            loadbalancer_sync: registered(
                registry,
                "service_controller_loadbalancer_sync",
                "A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster",
                m.loadbalancer_sync,
            ),
            nodesync_error: registered(
                registry,
                "service_controller_nodesync_error",
                "A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster",
                m.nodesync_error,
            ),
            nodesync_latency: registered(
                registry,
                "service_controller_nodesync_latency_seconds",
                "A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates.",
                m.nodesync_latency,
            ),
            update_host_latency: registered(
                registry,
                "service_controller_update_loadbalancer_host_latency_seconds",
                "A metric measuring the latency for updating each load balancer hosts.",
                m.update_host_latency,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_upstream_names() {
        let mut registry = Registry::default();
        let m = ServiceMetrics::new(&mut registry);
        m.loadbalancer_sync.inc();
        m.nodesync_latency.observe(3.0);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for name in [
            "service_controller_loadbalancer_sync_total 1",
            "service_controller_nodesync_error_total 0",
            "service_controller_nodesync_latency_seconds_bucket{le=\"4.0\"} 1",
            "service_controller_nodesync_latency_seconds_bucket{le=\"16384.0\"} 1",
            "service_controller_update_loadbalancer_host_latency_seconds_count 0",
        ] {
            assert!(text.contains(name), "missing {name} in\n{text}");
        }
    }
}
