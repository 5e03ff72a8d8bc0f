//! The route controller's Prometheus metric, under the upstream name
//! (kubernetes/cloud-provider `controllers/route/metrics.go`).

use controller_manager::metrics::registered;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

/// Handles to the route controller's metrics; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct RouteMetrics {
    /// `route_controller_route_sync_total`: reconcile passes started.
    pub route_sync: Counter,
}

impl RouteMetrics {
    /// Creates the metrics and registers them in `registry` under the upstream names.
    pub fn new(registry: &mut Registry) -> Self {
        // prometheus-client appends `_total` to counters when encoding.
        Self {
            route_sync: registered(
                registry,
                "route_controller_route_sync",
                "A metric counting the amount of times routes have been synced with the cloud provider.",
                Counter::default(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_upstream_name() {
        let mut registry = Registry::default();
        let m = RouteMetrics::new(&mut registry);
        m.route_sync.inc();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("route_controller_route_sync_total 1"),
            "{text}"
        );
    }
}
