//! `--feature-gates`, as component-base's `featuregate`: `Name=bool` pairs separated by commas
//! (the flag may be repeated; a later value wins), Go's boolean spellings, `AllAlpha`/`AllBeta`
//! setting every alpha/beta gate not named explicitly, and upstream's error wording, wrapped as
//! pflag reports a bad flag value.
//!
//! The gates are those the upstream cloud-controller-manager registers from
//! k8s.io/controller-manager (`pkg/features`) and component-base (logging, metrics), plus
//! client-go's `WatchListClient`, which kube's binaries register alongside.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Enables the webhook server (`--webhooks`, `--webhook-*`).
pub const CLOUD_CONTROLLER_MANAGER_WEBHOOK: &str = "CloudControllerManagerWebhook";
/// Event-driven route reconciliation (KEP-5237) instead of the periodic loop.
pub const CLOUD_CONTROLLER_MANAGER_WATCH_BASED_ROUTES_RECONCILIATION: &str =
    "CloudControllerManagerWatchBasedRoutesReconciliation";
/// Release the leader-election Lease on exit (read by kube-controller-manager only upstream).
pub const CONTROLLER_MANAGER_RELEASE_LEADER_ELECTION_LOCK_ON_EXIT: &str =
    "ControllerManagerReleaseLeaderElectionLockOnExit";

/// Informers sync through streaming lists (KEP-3157) where the server serves them; client-go's
/// gate, which kube's binaries register too.
pub const WATCH_LIST_CLIENT: &str = "WatchListClient";

const ALL_ALPHA: &str = "AllAlpha";
const ALL_BETA: &str = "AllBeta";

/// Maturity of a gate, as shown in `--help`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Off by default, may change or go away.
    Alpha,
    /// Usually on by default.
    Beta,
    /// Always on; kept for compatibility.
    Ga,
    /// Going away.
    Deprecated,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Ga => "GA",
            Stage::Deprecated => "DEPRECATED",
        })
    }
}

/// One known gate.
#[derive(Clone, Copy, Debug)]
pub struct Feature {
    /// The name operators write.
    pub name: &'static str,
    /// Value when not named.
    pub default: bool,
    /// Maturity.
    pub stage: Stage,
    /// Whether setting it to anything but the default is an error.
    pub lock_to_default: bool,
}

const fn gate(name: &'static str, default: bool, stage: Stage) -> Feature {
    Feature {
        name,
        default,
        stage,
        lock_to_default: false,
    }
}

/// Every gate `--feature-gates` accepts, as the upstream cloud-controller-manager registers them.
pub const KNOWN_FEATURES: &[Feature] = &[
    gate(CLOUD_CONTROLLER_MANAGER_WEBHOOK, false, Stage::Alpha),
    gate(
        CLOUD_CONTROLLER_MANAGER_WATCH_BASED_ROUTES_RECONCILIATION,
        false,
        Stage::Alpha,
    ),
    gate(
        CONTROLLER_MANAGER_RELEASE_LEADER_ELECTION_LOCK_ON_EXIT,
        false,
        Stage::Alpha,
    ),
    gate("ContextualLogging", true, Stage::Beta),
    gate("LoggingAlphaOptions", false, Stage::Alpha),
    gate("LoggingBetaOptions", true, Stage::Beta),
    gate("NativeHistograms", false, Stage::Alpha),
    gate(WATCH_LIST_CLIENT, true, Stage::Beta),
];

/// The `--feature-gates` help text: component-base's list of `Name=true|false (STAGE -
/// default=...)` lines, sorted, with `AllAlpha` and `AllBeta`.
pub fn feature_gates_help() -> String {
    let mut lines: Vec<String> = KNOWN_FEATURES
        .iter()
        .filter(|f| f.stage != Stage::Ga && !f.lock_to_default)
        .map(|f| {
            format!(
                "{}=true|false ({} - default={})",
                f.name, f.stage, f.default
            )
        })
        .collect();
    lines.push(format!("{ALL_ALPHA}=true|false (ALPHA - default=false)"));
    lines.push(format!("{ALL_BETA}=true|false (BETA - default=false)"));
    lines.sort();
    format!(
        "A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:\n{}",
        lines.join("\n")
    )
}

/// Which gates are on; built from `--feature-gates` by [`FeatureGates::parse`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    enabled: BTreeMap<&'static str, bool>,
}

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates {
            enabled: KNOWN_FEATURES.iter().map(|f| (f.name, f.default)).collect(),
        }
    }
}

impl FeatureGates {
    /// Parses the values of every `--feature-gates` occurrence, split on commas, in time linear
    /// in their number (a later entry for a name replaces an earlier one without a search). The
    /// error reads as pflag's, `invalid argument for "--feature-gates" flag: <reason>`, but
    /// names the gate only, never the flag's value or an entry's value.
    pub fn parse(items: &[String]) -> Result<Self, String> {
        let wrap =
            |reason: String| format!("invalid argument for \"--feature-gates\" flag: {reason}");
        // Each name's value and the position of its last entry: the order a later entry for a
        // name gives it, as when it was removed and appended again.
        let mut requested: HashMap<&str, (usize, bool)> = HashMap::new();
        for (at, item) in items.iter().enumerate().filter(|(_, s)| !s.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(wrap(format!(
                    "missing bool value for {}",
                    shown(item.trim())
                )));
            };
            let key = key.trim();
            let value = parse_go_bool(value.trim()).ok_or_else(|| {
                wrap(format!(
                    "invalid value of {}, err: strconv.ParseBool: invalid syntax",
                    shown(key)
                ))
            })?;
            requested.insert(key, (at, value));
        }
        let mut ordered: Vec<(&str, usize, bool)> = requested
            .iter()
            .map(|(key, (at, value))| (*key, *at, *value))
            .collect();
        ordered.sort_unstable_by_key(|(_, at, _)| *at);
        let mut gates = FeatureGates::default();
        for (key, _, value) in ordered {
            let stage = match key {
                ALL_ALPHA => Some(Stage::Alpha),
                ALL_BETA => Some(Stage::Beta),
                _ => None,
            };
            if let Some(stage) = stage {
                for f in KNOWN_FEATURES.iter().filter(|f| f.stage == stage) {
                    if !requested.contains_key(f.name) && !f.lock_to_default {
                        gates.enabled.insert(f.name, value);
                    }
                }
                continue;
            }
            let feature = KNOWN_FEATURES
                .iter()
                .find(|f| f.name == key)
                .ok_or_else(|| wrap(format!("unrecognized feature gate: {}", shown(key))))?;
            if feature.lock_to_default && feature.default != value {
                return Err(wrap(format!(
                    "cannot set feature gate {key} to {value}, feature is locked to {}",
                    feature.default
                )));
            }
            gates.enabled.insert(feature.name, value);
        }
        Ok(gates)
    }

    /// Whether the gate named `name` is on; unknown names are off.
    pub fn enabled(&self, name: &str) -> bool {
        self.enabled.get(name).copied().unwrap_or(false)
    }

    /// Turns a gate on or off (tests, embedders that fix a gate).
    pub fn set(&mut self, name: &'static str, value: bool) {
        self.enabled.insert(name, value);
    }
}

/// A gate name as an error shows it: escaped, and cut if it runs long (whatever was pasted
/// into the flag is never printed whole).
fn shown(name: &str) -> String {
    crate::config_file::cut(name.escape_debug().to_string())
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<FeatureGates, String> {
        let items: Vec<String> = s.split(',').map(str::to_string).collect();
        FeatureGates::parse(&items)
    }

    #[test]
    fn defaults_are_upstreams() {
        let g = FeatureGates::parse(&[]).unwrap();
        assert!(!g.enabled(CLOUD_CONTROLLER_MANAGER_WEBHOOK));
        assert!(!g.enabled(CLOUD_CONTROLLER_MANAGER_WATCH_BASED_ROUTES_RECONCILIATION));
        assert!(g.enabled("ContextualLogging"));
    }

    #[test]
    fn pairs_take_go_booleans_and_spaces() {
        let g = parse(" CloudControllerManagerWebhook = T ,ContextualLogging=0,").unwrap();
        assert!(g.enabled(CLOUD_CONTROLLER_MANAGER_WEBHOOK));
        assert!(!g.enabled("ContextualLogging"));
    }

    #[test]
    fn errors_use_upstream_wording() {
        assert_eq!(
            parse("ContextualLogging=true,Foo=true").unwrap_err(),
            r#"invalid argument for "--feature-gates" flag: unrecognized feature gate: Foo"#
        );
        assert!(
            parse("ContextualLogging")
                .unwrap_err()
                .ends_with("missing bool value for ContextualLogging")
        );
        assert!(parse("ContextualLogging=yes").unwrap_err().ends_with(
            r#"invalid value of ContextualLogging, err: strconv.ParseBool: invalid syntax"#
        ));
    }

    /// A value never appears in an error, and neither does the rest of the flag; a runaway
    /// name is cut.
    #[test]
    fn errors_never_quote_a_value_or_the_flag() {
        let secret = "s3cr3t-hunter2";
        for flag in [
            format!("ContextualLogging={secret}"),
            format!("ContextualLogging=true,Token={secret},Foo=true"),
            format!("ContextualLogging=true,LoggingBetaOptions={secret}"),
        ] {
            let err = parse(&flag).unwrap_err();
            assert!(!err.contains(secret), "{flag}: {err}");
            assert!(!err.contains("ContextualLogging=true"), "{flag}: {err}");
        }
        let long = "N".repeat(100_000);
        let err = parse(&format!("{long}=true")).unwrap_err();
        assert!(err.len() < 400, "{}", err.len());
    }

    /// The issue's input: nine `--feature-gates` of 11,000 entries each (99,000 distinct names
    /// and as many repeats of known ones) parse in linear time. Before, each entry searched the
    /// names kept so far, and this was still running after 20 s; the bound leaves a loaded
    /// debug build room.
    #[test]
    fn nine_flags_of_eleven_thousand_entries_parse_in_linear_time() {
        let distinct: Vec<String> = (0..99_000).map(|i| format!("G{i:05}=true")).collect();
        let mut repeated: Vec<String> = (0..99_000)
            .map(|i| {
                format!(
                    "{}={}",
                    KNOWN_FEATURES[i % KNOWN_FEATURES.len()].name,
                    i % 2 == 0
                )
            })
            .collect();
        repeated.push("AllBeta=false".into());
        let start = std::time::Instant::now();
        let err = FeatureGates::parse(&distinct).unwrap_err();
        assert!(err.ends_with("unrecognized feature gate: G00000"), "{err}");
        let gates = FeatureGates::parse(&repeated).unwrap();
        let took = start.elapsed();
        // The last of 99,000 entries names KNOWN_FEATURES[98_999 % len] with 98_999 % 2 == 1.
        let last = KNOWN_FEATURES[98_999 % KNOWN_FEATURES.len()].name;
        assert!(!gates.enabled(last));
        assert!(
            took < std::time::Duration::from_secs(2),
            "two parses of 99,000 entries took {took:?}"
        );
    }

    #[test]
    fn all_alpha_and_all_beta_leave_named_gates_alone() {
        let g = parse("CloudControllerManagerWebhook=false,AllAlpha=true").unwrap();
        assert!(!g.enabled(CLOUD_CONTROLLER_MANAGER_WEBHOOK));
        assert!(g.enabled(CLOUD_CONTROLLER_MANAGER_WATCH_BASED_ROUTES_RECONCILIATION));
        assert!(g.enabled("LoggingAlphaOptions"));
        assert!(g.enabled("LoggingBetaOptions"), "beta untouched");
        let g = parse("AllBeta=false").unwrap();
        assert!(!g.enabled("ContextualLogging") && !g.enabled("LoggingBetaOptions"));
        assert!(
            !g.enabled(CLOUD_CONTROLLER_MANAGER_WEBHOOK),
            "alpha untouched"
        );
    }

    #[test]
    fn a_later_value_wins() {
        let g = parse("CloudControllerManagerWebhook=true,CloudControllerManagerWebhook=false")
            .unwrap();
        assert!(!g.enabled(CLOUD_CONTROLLER_MANAGER_WEBHOOK));
    }

    #[test]
    fn help_lists_every_gate_as_component_base() {
        let help = feature_gates_help();
        assert!(help.contains("\nAllAlpha=true|false (ALPHA - default=false)\n"));
        assert!(help.contains(
            "CloudControllerManagerWatchBasedRoutesReconciliation=true|false (ALPHA - default=false)"
        ));
        assert!(help.contains("ContextualLogging=true|false (BETA - default=true)"));
    }
}
