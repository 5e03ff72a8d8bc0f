//! What a scenario process measures about itself and hands back to the parent as one JSON line.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{alloc, procfs};

/// Prefix of the line a scenario process prints its figures on (everything else is ignored).
pub const RESULT_PREFIX: &str = "RESULT ";

/// One scenario's figures; optional ones are left out by scenarios that do not measure them.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Figures {
    /// Objects the scenario cached or reconciled.
    pub objects: usize,
    /// Seconds from start until every cache held its first complete list.
    pub sync_s: Option<f64>,
    /// Seconds from start until every controller had reconciled every object once.
    pub first_pass_s: Option<f64>,
    /// Heap bytes live at the start of the measured phase (client built, nothing cached).
    pub heap_base: usize,
    /// Highest live heap bytes during the measured phase.
    pub heap_peak: usize,
    /// Live heap bytes once settled.
    pub heap_steady: usize,
    /// Kernel high-water resident set of the scenario process.
    pub rss_peak: u64,
    /// Resident set once settled.
    pub rss_steady: u64,
    /// User + system CPU seconds of the scenario process.
    pub cpu_s: f64,
    /// Latency samples' percentiles in microseconds: p50, p90, p99, max (latency scenarios).
    pub latency_us: Option<[f64; 4]>,
    /// Latency samples taken.
    pub samples: Option<usize>,
    /// Average JSON size of one object on the wire.
    pub wire_bytes: Option<usize>,
}

impl Figures {
    /// The figures of a measured phase starting now: the heap base is what is live now, and the
    /// heap peak starts from it.
    pub fn begin() -> Self {
        let figures = Figures {
            heap_base: alloc::live(),
            ..Figures::default()
        };
        alloc::reset_peak();
        figures
    }

    /// Fills the process-wide figures (heap, RSS, CPU) as of now; with `BENCH_SMAPS` set, also
    /// prints where the resident set lives (`procfs::resident_by_mapping`) to stderr.
    pub fn settle(&mut self) {
        self.heap_steady = alloc::live();
        self.heap_peak = alloc::peak();
        self.rss_steady = procfs::rss();
        self.rss_peak = procfs::rss_peak();
        self.cpu_s = procfs::cpu_seconds();
        if std::env::var_os("BENCH_SMAPS").is_some() {
            eprintln!("{}", procfs::resident_by_mapping());
        }
    }

    /// Prints the result line the parent parses.
    pub fn emit(&self) -> anyhow::Result<()> {
        println!("{RESULT_PREFIX}{}", serde_json::to_string(self)?);
        Ok(())
    }
}

/// p50, p90, p99 and max of `samples` (nanoseconds) in microseconds; zeros when empty.
pub fn percentiles_us(samples: &mut [u64]) -> [f64; 4] {
    if samples.is_empty() {
        return [0.0; 4];
    }
    samples.sort_unstable();
    let at = |q: f64| {
        let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[i] as f64 / 1e3
    };
    [
        at(0.50),
        at(0.90),
        at(0.99),
        samples[samples.len() - 1] as f64 / 1e3,
    ]
}

/// Seconds as a float, for the JSON line.
pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Megabytes (10^6) with one decimal, for tables.
pub fn mb(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1e6)
}
