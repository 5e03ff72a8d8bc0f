//! controller-runtime's reconcile metrics, labelled `controller`, so its dashboards and alerts
//! apply unchanged: `controller_runtime_reconcile_total{result=success|error|requeue_after}`,
//! `controller_runtime_reconcile_errors_total`, `controller_runtime_reconcile_time_seconds`,
//! `controller_runtime_reconcile_panics_total` and `controller_runtime_active_workers`
//! (reconciles in flight). Counters are registered without `_total`, which prometheus-client
//! appends itself.

mod future;
mod layer;
mod service;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::{HistogramFamily, histograms, registered};

pub use future::MetricsFuture;
pub use layer::MetricsLayer;
pub use service::Metrics;

/// controller-runtime's `reconcile_time_seconds` buckets.
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: &'static str,
}

/// The reconcile metric families shared by every controller of a process; create once per
/// registry and hand to each controller's [`MetricsLayer`].
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    total: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabel, Counter>,
    time: HistogramFamily<ControllerLabel>,
    panics: Family<ControllerLabel, Counter>,
    active: Family<ControllerLabel, Gauge>,
}

impl ControllerMetrics {
    /// Registers the five controller-runtime reconcile families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        Self {
            total: registered(
                registry,
                "controller_runtime_reconcile",
                "Total number of reconciliations per controller",
                Family::default(),
            ),
            errors: registered(
                registry,
                "controller_runtime_reconcile_errors",
                "Total number of reconciliation errors per controller",
                Family::default(),
            ),
            time: registered(
                registry,
                "controller_runtime_reconcile_time_seconds",
                "Length of time per reconciliation per controller",
                histograms(&RECONCILE_BUCKETS),
            ),
            panics: registered(
                registry,
                "controller_runtime_reconcile_panics",
                "Total number of reconciliation panics per controller",
                Family::default(),
            ),
            active: registered(
                registry,
                "controller_runtime_active_workers",
                "Number of currently used workers per controller",
                Family::default(),
            ),
        }
    }

    /// Resolves (and zero-initialises, as controller-runtime does) one controller's children.
    fn for_controller(&self, controller: &str) -> ReconcileMetrics {
        let label = ControllerLabel {
            controller: controller.to_owned(),
        };
        let result = |result| {
            self.total.get_or_create_owned(&ResultLabels {
                controller: controller.to_owned(),
                result,
            })
        };
        ReconcileMetrics {
            success: result("success"),
            error: result("error"),
            requeue_after: result("requeue_after"),
            errors: self.errors.get_or_create_owned(&label),
            time: self.time.get_or_create_owned(&label),
            panics: self.panics.get_or_create_owned(&label),
            active: self.active.get_or_create_owned(&label),
        }
    }
}

/// One controller's metric children, resolved once so a reconcile touches only atomics.
#[derive(Clone, Debug)]
struct ReconcileMetrics {
    success: Counter,
    error: Counter,
    requeue_after: Counter,
    errors: Counter,
    time: Histogram,
    panics: Counter,
    active: Gauge,
}
