//! The cloud call metric families, named like the rest of the framework's Prometheus metrics.

use std::time::Duration;

use controller_manager::metrics::{HistogramFamily, histograms, registered};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Latency buckets for cloud calls: 5 ms to 5 min (load balancer changes can take minutes).
pub const CLOUD_LATENCY_BUCKETS: [f64; 13] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// Buckets of `cloud_provider_budget_wait_seconds`: 1 ms (a token almost there) to 5 min (a
/// long `Retry-After`).
pub const BUDGET_WAIT_BUCKETS: [f64; 13] = [
    0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Labels of `cloud_provider_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CloudCallLabels {
    /// `provider_name()` of the wrapped provider.
    pub provider: String,
    /// Upstream Go method name, e.g. `EnsureLoadBalancer`.
    pub method: String,
    /// See the module docs.
    pub outcome: String,
}

/// Labels of `cloud_provider_request_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CloudLatencyLabels {
    /// `provider_name()` of the wrapped provider.
    pub provider: String,
    /// Upstream Go method name.
    pub method: String,
}

type LatencyFamily = HistogramFamily<CloudLatencyLabels>;

/// The cloud call metric families; one per process, shared by every wrapper.
#[derive(Clone, Debug)]
pub struct CloudMetrics {
    requests: Family<CloudCallLabels, Counter>,
    duration: LatencyFamily,
    budget_wait: LatencyFamily,
}

impl CloudMetrics {
    /// Registers the families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        Self {
            requests: registered(
                registry,
                "cloud_provider_requests",
                "Number of cloud provider calls, by provider, method and outcome",
                Family::default(),
            ),
            duration: registered(
                registry,
                "cloud_provider_request_duration_seconds",
                "Latency of cloud provider calls in seconds, by provider and method",
                histograms(&CLOUD_LATENCY_BUCKETS),
            ),
            budget_wait: registered(
                registry,
                "cloud_provider_budget_wait_seconds",
                "Time cloud provider calls waited for the cloud call budget (a paused method, an in-flight slot, a rate token) before they were made, in seconds, by provider and method",
                histograms(&BUDGET_WAIT_BUCKETS),
            ),
        }
    }

    pub(super) fn record_budget_wait(&self, provider: &str, method: &str, waited: Duration) {
        self.budget_wait
            .get_or_create(&CloudLatencyLabels {
                provider: provider.to_string(),
                method: method.to_string(),
            })
            .observe(waited.as_secs_f64());
    }

    pub(super) fn record(&self, provider: &str, method: &str, outcome: &str, took: Duration) {
        self.requests
            .get_or_create(&CloudCallLabels {
                provider: provider.to_string(),
                method: method.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
        self.duration
            .get_or_create(&CloudLatencyLabels {
                provider: provider.to_string(),
                method: method.to_string(),
            })
            .observe(took.as_secs_f64());
    }
}
