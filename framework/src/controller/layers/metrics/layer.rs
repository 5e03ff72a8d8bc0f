//! The layer that wraps a service in [`Metrics`].

use tower::Layer;

use super::{ControllerMetrics, Metrics, ReconcileMetrics};

/// Records controller-runtime's reconcile metrics for one controller.
#[derive(Clone, Debug)]
pub struct MetricsLayer {
    metrics: ReconcileMetrics,
}

impl MetricsLayer {
    /// Reports reconciles of `controller` under the shared `metrics` families.
    pub fn new(controller: &str, metrics: &ControllerMetrics) -> Self {
        Self {
            metrics: metrics.for_controller(controller),
        }
    }
}

impl<S> Layer<S> for MetricsLayer {
    type Service = Metrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Metrics::new(inner, self.metrics.clone())
    }
}
