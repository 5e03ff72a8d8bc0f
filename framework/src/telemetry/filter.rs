//! Which log lines and spans are enabled: `RUST_LOG` when set, else the klog-style `-v` level.

use tracing_subscriber::EnvFilter;

use super::TelemetryError;

/// The crates of this project; `-v` raises their level first, before any dependency's.
pub const OUR_CRATES: &[&str] = &[
    "controller_manager",
    "cloud_controllers",
    "cloud_controller_manager",
    "kube_testenv",
    "embedding_examples",
];

/// The kube-rs crates, raised to debug at `-v=4` so API requests and watch restarts show.
const KUBE_CRATES: &[&str] = &["kube", "kube_client", "kube_runtime"];

/// The `EnvFilter` directives for a `-v` level: 0 `info`; 1-3 `debug` for our crates; 4 and
/// above `trace` for our crates and `debug` for kube. Everything else stays at `info`.
pub fn verbosity_directives(verbosity: u8) -> String {
    let mut directives = vec!["info".to_string()];
    let ours = match verbosity {
        0 => None,
        1..=3 => Some("debug"),
        _ => Some("trace"),
    };
    if let Some(level) = ours {
        directives.extend(OUR_CRATES.iter().map(|c| format!("{c}={level}")));
    }
    if verbosity >= 4 {
        directives.extend(KUBE_CRATES.iter().map(|c| format!("{c}=debug")));
    }
    directives.join(",")
}

/// `rust_log` (the value of `RUST_LOG`) wins over `-v` when it is set and not blank.
pub fn env_filter(rust_log: Option<&str>, verbosity: u8) -> Result<EnvFilter, TelemetryError> {
    let directives = match rust_log.map(str::trim).filter(|s| !s.is_empty()) {
        Some(explicit) => explicit.to_string(),
        None => verbosity_directives(verbosity),
    };
    EnvFilter::builder()
        .parse(&directives)
        .map_err(|e| TelemetryError::InvalidFilter {
            directives,
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use tracing::level_filters::LevelFilter;

    use super::*;

    #[test]
    fn verbosity_zero_is_info_everywhere() {
        assert_eq!(verbosity_directives(0), "info");
    }

    #[test]
    fn verbosity_one_to_three_is_debug_for_our_crates_only() {
        for v in 1..=3 {
            let d = verbosity_directives(v);
            assert!(d.contains("controller_manager=debug"), "{d}");
            assert!(d.contains("cloud_controllers=debug"), "{d}");
            assert!(!d.contains("kube=debug"), "{d}");
            assert!(d.starts_with("info,"), "{d}");
        }
    }

    #[test]
    fn verbosity_four_and_up_is_trace_for_ours_and_debug_for_kube() {
        for v in [4, 6, 10] {
            let d = verbosity_directives(v);
            assert!(d.contains("controller_manager=trace"), "{d}");
            assert!(d.contains("kube_client=debug"), "{d}");
            assert!(d.contains("kube_runtime=debug"), "{d}");
        }
    }

    #[test]
    fn rust_log_wins_over_verbosity() {
        let f = env_filter(Some("warn"), 6).unwrap();
        assert_eq!(f.max_level_hint(), Some(LevelFilter::WARN));
        let f = env_filter(Some("  "), 0).unwrap();
        assert_eq!(f.max_level_hint(), Some(LevelFilter::INFO));
        let f = env_filter(None, 4).unwrap();
        assert_eq!(f.max_level_hint(), Some(LevelFilter::TRACE));
    }

    #[test]
    fn invalid_rust_log_is_reported_with_its_text() {
        let err = env_filter(Some("foo=notalevel"), 0).unwrap_err();
        assert!(err.to_string().contains("foo=notalevel"), "{err}");
    }
}
