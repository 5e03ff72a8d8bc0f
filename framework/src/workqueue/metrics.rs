//! Work-queue Prometheus metrics under client-go's exact names, so dashboards built for
//! kube-controller-manager and the Go cloud-controller-manager keep working.
//!
//! Every metric is labelled `name=<queue name>`. prometheus-client appends `_total` to counters
//! itself, so the counters are registered as `workqueue_adds` and `workqueue_retries`; it also
//! appends a full stop to each help text, so ours carry none.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::time::Duration;

use crate::metrics::{HistogramFamily, histograms, registered};

/// client-go's buckets for both duration histograms: 1e-8 s … 10 s, ×10.
const DURATION_BUCKETS: [f64; 10] = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];

/// The one label every work-queue metric carries, so lanes of one process can be told apart.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    name: String,
}

type SecondsGauge = Gauge<f64, AtomicU64>;

/// The metric families shared by every queue of a process; create once per registry and pass to
/// each queue's builder so all lanes report under the same families.
#[derive(Clone, Debug)]
pub struct WorkQueueMetrics {
    depth: Family<QueueLabel, Gauge>,
    adds: Family<QueueLabel, Counter>,
    queue_duration: HistogramFamily<QueueLabel>,
    work_duration: HistogramFamily<QueueLabel>,
    unfinished: Family<QueueLabel, SecondsGauge>,
    longest: Family<QueueLabel, SecondsGauge>,
    retries: Family<QueueLabel, Counter>,
}

impl WorkQueueMetrics {
    /// Registers the seven client-go work-queue families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        Self {
            depth: registered(
                registry,
                "workqueue_depth",
                "Current depth of workqueue",
                Family::default(),
            ),
            adds: registered(
                registry,
                "workqueue_adds",
                "Total number of adds handled by workqueue",
                Family::default(),
            ),
            queue_duration: registered(
                registry,
                "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested",
                histograms(&DURATION_BUCKETS),
            ),
            work_duration: registered(
                registry,
                "workqueue_work_duration_seconds",
                "How long in seconds processing an item from workqueue takes",
                histograms(&DURATION_BUCKETS),
            ),
            unfinished: registered(
                registry,
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has done that is in progress and hasn't been observed by \
             work_duration. Large values indicate stuck threads. One can deduce the number of stuck \
             threads by observing the rate at which this increases",
                Family::default(),
            ),
            longest: registered(
                registry,
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running",
                Family::default(),
            ),
            retries: registered(
                registry,
                "workqueue_retries",
                "Total number of retries handled by workqueue",
                Family::default(),
            ),
        }
    }

    /// Resolves the children for one queue name once, so queue operations touch only atomics.
    pub(super) fn for_queue(&self, name: &str) -> QueueMetrics {
        let label = QueueLabel {
            name: name.to_owned(),
        };
        QueueMetrics {
            depth: self.depth.get_or_create_owned(&label),
            adds: self.adds.get_or_create_owned(&label),
            queue_duration: self.queue_duration.get_or_create_owned(&label),
            work_duration: self.work_duration.get_or_create_owned(&label),
            unfinished: self.unfinished.get_or_create_owned(&label),
            longest: self.longest.get_or_create_owned(&label),
            retries: self.retries.get_or_create_owned(&label),
        }
    }
}

/// One queue's metric children (cheap `Arc` clones of the family members).
#[derive(Clone, Debug)]
pub(super) struct QueueMetrics {
    depth: Gauge,
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    unfinished: SecondsGauge,
    longest: SecondsGauge,
    retries: Counter,
}

impl QueueMetrics {
    /// An accepted `add` (the key became dirty, even while processing).
    pub(super) fn added(&self) {
        self.adds.inc();
        self.depth.inc();
    }

    /// A `get` handed a key out; `waited` is the time since its first add, if recorded.
    pub(super) fn got(&self, waited: Option<Duration>) {
        self.depth.dec();
        if let Some(waited) = waited {
            self.queue_duration.observe(waited.as_secs_f64());
        }
    }

    /// A `done` for a key handed out `took` ago.
    pub(super) fn finished(&self, took: Duration) {
        self.work_duration.observe(took.as_secs_f64());
    }

    /// An accepted `add_after` / `add_rate_limited`.
    pub(super) fn retried(&self) {
        self.retries.inc();
    }

    /// Refreshes the in-flight gauges (client-go does this every 500 ms).
    pub(super) fn in_flight(&self, unfinished: Duration, longest: Duration) {
        self.unfinished.set(unfinished.as_secs_f64());
        self.longest.set(longest.as_secs_f64());
    }
}
