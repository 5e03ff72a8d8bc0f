//! Registering a Prometheus metric and keeping its handle in one step, so a metric struct is
//! built as one list of (name, help, metric) and no metric is named twice; and histogram
//! families whose series share one bucket list.

use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

/// Registers `metric` in `registry` under `name` with `help` and hands it back for the caller
/// to keep, e.g. `depth: registered(registry, "workqueue_depth", "…", Family::default())`.
///
/// The names and help texts are upstream's (prometheus-client appends `_total` to counters and
/// a full stop to help texts that lack one), so dashboards built for the Go components apply.
pub fn registered<M: Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    // The text encoder ends every help with a period; one already there would be doubled.
    registry.register(name, help.strip_suffix('.').unwrap_or(help), metric.clone());
    metric
}

/// The bucket list every series of a [`HistogramFamily`] is created with.
#[derive(Clone, Copy, Debug)]
pub struct Buckets(pub &'static [f64]);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

/// Histograms labelled `L`, all with the same [`Buckets`].
pub type HistogramFamily<L> = Family<L, Histogram, Buckets>;

/// An empty histogram family whose series will have `buckets` (upper bounds, in seconds for
/// the latency families).
pub fn histograms<L>(buckets: &'static [f64]) -> HistogramFamily<L>
where
    L: Clone + std::hash::Hash + Eq,
{
    Family::new_with_constructor(Buckets(buckets))
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::metrics::counter::Counter;

    use super::*;

    #[test]
    fn the_handle_kept_is_the_one_exported() {
        let mut registry = Registry::default();
        let kept: Counter = registered(&mut registry, "things", "Things seen", Counter::default());
        kept.inc();
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(text.contains("# HELP things Things seen."), "{text}");
        assert!(text.contains("things_total 1"), "{text}");
    }

    #[test]
    fn every_series_of_a_histogram_family_has_its_buckets() {
        let mut registry = Registry::default();
        let family: HistogramFamily<Vec<(String, String)>> =
            registered(&mut registry, "waits", "Waits", histograms(&[0.5, 2.0]));
        family
            .get_or_create(&vec![("q".into(), "a".into())])
            .observe(1.0);
        family
            .get_or_create(&vec![("q".into(), "b".into())])
            .observe(3.0);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("waits_bucket{le=\"2.0\",q=\"a\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("waits_bucket{le=\"2.0\",q=\"b\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("waits_bucket{le=\"+Inf\",q=\"b\"} 1"),
            "{text}"
        );
    }
}
