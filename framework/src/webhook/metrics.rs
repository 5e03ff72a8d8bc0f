//! controller-runtime's webhook metrics, so its dashboards and alerts apply unchanged:
//! `controller_runtime_webhook_requests_total{webhook,code}`,
//! `controller_runtime_webhook_latency_seconds{webhook}`,
//! `controller_runtime_webhook_requests_in_flight{webhook}` and
//! `controller_runtime_webhook_panics_total`; the `webhook` label is the path, as theirs.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::{HistogramFamily, histograms, registered};

/// Prometheus' default buckets, which controller-runtime's latency histogram uses.
const LATENCY_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct WebhookLabel {
    pub(crate) webhook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CodeLabels {
    pub(crate) webhook: String,
    pub(crate) code: String,
}

/// The webhook metric families of a process; register once, share with every route.
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    pub(crate) requests: Family<CodeLabels, Counter>,
    pub(crate) latency: HistogramFamily<WebhookLabel>,
    pub(crate) in_flight: Family<WebhookLabel, Gauge>,
    pub(crate) panics: Counter,
}

impl WebhookMetrics {
    /// Registers the four families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        WebhookMetrics {
            requests: registered(
                registry,
                "controller_runtime_webhook_requests",
                "Total number of admission requests by HTTP status code",
                Family::default(),
            ),
            latency: registered(
                registry,
                "controller_runtime_webhook_latency_seconds",
                "Histogram of the latency of processing admission requests",
                histograms(&LATENCY_BUCKETS),
            ),
            in_flight: registered(
                registry,
                "controller_runtime_webhook_requests_in_flight",
                "Current number of admission requests being served",
                Family::default(),
            ),
            panics: registered(
                registry,
                "controller_runtime_webhook_panics",
                "Total number of webhook panics",
                Counter::default(),
            ),
        }
    }
}
