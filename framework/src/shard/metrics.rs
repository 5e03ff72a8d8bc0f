//! Per-ring metrics (members, owned fraction, handovers and their duration, settled) and the
//! health check that fails when the member's Lease is not being renewed.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::metrics::registered;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RingLabel {
    ring: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    ring: String,
    reason: &'static str,
}

/// Why a label-mode member wrote an object's assignment label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelWrite {
    /// An unlabelled object that hashes to this member.
    Claim,
    /// An object of this member that the settled view gives to another.
    Move,
    /// An object labelled to no live member (one that left, or a value no member has), that
    /// hashes to this member.
    Reclaim,
}

impl LabelWrite {
    fn as_str(self) -> &'static str {
        match self {
            Self::Claim => "claim",
            Self::Move => "move",
            Self::Reclaim => "reclaim",
        }
    }
}

fn handover_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.1, 2.0, 12))
}

/// The `shard_ring_*` metrics; one series per ring.
#[derive(Clone)]
pub struct RingMetrics {
    members: Family<RingLabel, Gauge>,
    owned_permille: Family<RingLabel, Gauge>,
    settled: Family<RingLabel, Gauge>,
    handovers: Family<RingLabel, Counter>,
    handover_seconds: Family<RingLabel, Histogram, fn() -> Histogram>,
    label_writes: Family<WriteLabels, Counter>,
}

impl Default for RingMetrics {
    fn default() -> Self {
        Self {
            members: Family::default(),
            owned_permille: Family::default(),
            settled: Family::default(),
            handovers: Family::default(),
            handover_seconds: Family::new_with_constructor(handover_histogram),
            label_writes: Family::default(),
        }
    }
}

impl std::fmt::Debug for RingMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RingMetrics")
    }
}

impl RingMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        Self {
            members: registered(
                registry,
                "shard_ring_members",
                "Live members in the view this replica last settled, per ring.",
                m.members,
            ),
            owned_permille: registered(
                registry,
                "shard_ring_owned_permille",
                "Thousandths of the hash space this replica may reconcile, per ring.",
                m.owned_permille,
            ),
            settled: registered(
                registry,
                "shard_ring_settled",
                "1 when every live member has acknowledged this replica's view, per ring.",
                m.settled,
            ),
            handovers: registered(
                registry,
                "shard_ring_handovers",
                "Membership changes this replica has settled, per ring.",
                m.handovers,
            ),
            handover_seconds: registered(
                registry,
                "shard_ring_handover_duration_seconds",
                "Time from a membership change being seen to every live member acknowledging it.",
                m.handover_seconds,
            ),
            label_writes: registered(
                registry,
                "shard_ring_label_writes",
                "Assignment labels this replica wrote in label mode, per ring and reason (claim, move, reclaim).",
                m.label_writes,
            ),
        }
    }

    /// Counts one label write that succeeded.
    pub(crate) fn label_written(&self, ring: &str, why: LabelWrite) {
        self.label_writes
            .get_or_create(&Self::write(ring, why))
            .inc();
    }

    /// Label writes so far for `ring` and `why` (for tests and benchmarks).
    pub fn label_writes(&self, ring: &str, why: LabelWrite) -> u64 {
        self.label_writes
            .get_or_create(&Self::write(ring, why))
            .get()
    }

    fn write(ring: &str, why: LabelWrite) -> WriteLabels {
        WriteLabels {
            ring: ring.to_string(),
            reason: why.as_str(),
        }
    }

    fn label(ring: &str) -> RingLabel {
        RingLabel {
            ring: ring.to_string(),
        }
    }

    pub(crate) fn settled(&self, ring: &str, members: usize, owned: f64, took: f64) {
        let l = Self::label(ring);
        self.members
            .get_or_create(&l)
            .set(i64::try_from(members).unwrap_or(i64::MAX));
        self.owned_permille
            .get_or_create(&l)
            .set((owned * 1000.0).round() as i64);
        self.settled.get_or_create(&l).set(1);
        self.handovers.get_or_create(&l).inc();
        self.handover_seconds.get_or_create(&l).observe(took);
    }

    pub(crate) fn unsettled(&self, ring: &str) {
        let l = Self::label(ring);
        self.settled.get_or_create(&l).set(0);
        self.owned_permille.get_or_create(&l).set(0);
    }
}
