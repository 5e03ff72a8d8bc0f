//! The generic flag groups: controllers, API client, leader election, serving, logging.

use std::path::PathBuf;
use std::time::Duration;

use super::{EndHelpHeading, GoBoolArg};
use clap::{Args, ValueEnum};

use super::feature_gates::{FeatureGates, feature_gates_help};
use super::serving::ServingOptions;
use super::{CompatOptions, DebuggingOptions, GoDuration};

/// Flags every manager has, grouped in `--help` the way upstream groups them.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Generic flags", end_help_heading = true)]
pub struct GenericOptions {
    /// A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the controller named 'foo', '-foo' disables the controller named 'foo'.
    #[arg(long, value_delimiter = ',', default_value = "*", verbatim_doc_comment)]
    pub controllers: Vec<String>,

    /// A list of selected controllers that run on every replica at once, each replica reconciling the keys a consistent-hash ring over one Lease per live replica assigns it, never one key on two replicas at a time. The other controllers still run on the Lease holder only, from a warm cache. This build's own flag; empty (off) by default.
    #[arg(long, value_delimiter = ',', verbatim_doc_comment)]
    pub sharded_controllers: Vec<String>,

    /// How --sharded-controllers assign keys: 'hash' (every replica caches every object and reconciles the ones that hash to it) or 'label' (the assignment is also written on each object of the controller's kind as a label, and each replica caches only the objects labelled to it, about 1/N of them; needs patch on that kind). This build's own flag.
    #[arg(long, default_value = "hash", verbatim_doc_comment)]
    pub shard_assignment: String,

    /// Interval between starting controller managers.
    #[arg(long, default_value = "0s", verbatim_doc_comment)]
    pub controller_start_interval: GoDuration,

    /// The resync period in reflectors will be random between MinResyncPeriod and 2*MinResyncPeriod.
    #[arg(long, default_value = "12h0m0s", verbatim_doc_comment)]
    pub min_resync_period: GoDuration,

    /// `--feature-gates` as given (one `Name=bool` per entry); see [`Self::feature_gates`].
    #[arg(long = "feature-gates", value_delimiter = ',', value_name = "mapStringBool", help = feature_gates_help())]
    pub feature_gates: Vec<String>,

    /// API client connection settings.
    #[command(flatten)]
    pub client: ClientOptions,

    /// Leader election settings.
    #[command(flatten)]
    pub leader_election: LeaderElectionOptions,

    /// Health and metrics server settings.
    #[command(flatten)]
    pub serving: ServingOptions,

    /// Log settings.
    #[command(flatten)]
    pub logging: LoggingOptions,

    /// `--profiling`, `--contention-profiling` and the heap-profiler hook.
    #[command(flatten)]
    pub debugging: DebuggingOptions,

    /// Upstream flags accepted for compatibility, refused where their value cannot hold here.
    #[command(flatten)]
    pub compat: CompatOptions,
}

/// How the manager reaches the API server.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Generic flags", end_help_heading = true)]
pub struct ClientOptions {
    /// Path to kubeconfig file with authorization and master location information (the master location can be overridden by the master flag).
    #[arg(long, help_heading = "Misc flags", verbatim_doc_comment)]
    pub kubeconfig: Option<PathBuf>,

    /// The address of the Kubernetes API server (overrides any value in kubeconfig).
    #[arg(long, help_heading = "Misc flags", verbatim_doc_comment)]
    pub master: Option<String>,

    /// QPS to use while talking with kubernetes apiserver.
    #[arg(long, default_value_t = 20.0, verbatim_doc_comment)]
    pub kube_api_qps: f32,

    /// Burst to use while talking with kubernetes apiserver.
    #[arg(long, default_value_t = 30, verbatim_doc_comment)]
    pub kube_api_burst: u32,

    /// If true, use individual service account credentials for each controller.
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub use_service_account_credentials: bool,
}

/// Lease-based leader election, as in component-base's `LeaderElectionConfiguration`.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Leader-election flags", end_help_heading = true)]
pub struct LeaderElectionOptions {
    /// Start a leader election client and gain leadership before executing the main loop. Enable this when running replicated components for high availability.
    #[arg(long, go_bool = true, verbatim_doc_comment)]
    pub leader_elect: bool,

    /// The duration that non-leader candidates will wait after observing a leadership renewal until attempting to acquire leadership of a led but unrenewed leader slot.
    #[arg(long, default_value = "15s", verbatim_doc_comment)]
    pub leader_elect_lease_duration: GoDuration,

    /// The interval between attempts by the acting master to renew a leadership slot before it stops leading. This must be less than the lease duration.
    #[arg(long, default_value = "10s", verbatim_doc_comment)]
    pub leader_elect_renew_deadline: GoDuration,

    /// The duration the clients should wait between attempting acquisition and renewal of a leadership.
    #[arg(long, default_value = "2s", verbatim_doc_comment)]
    pub leader_elect_retry_period: GoDuration,

    /// The type of resource object that is used for locking during leader election. Supported options are 'leases'.
    #[arg(long, default_value = "leases", verbatim_doc_comment)]
    pub leader_elect_resource_lock: String,

    /// The name of resource object that is used for locking during leader election. [default: the manager's name]
    #[arg(long, verbatim_doc_comment)]
    pub leader_elect_resource_name: Option<String>,

    /// The namespace of resource object that is used for locking during leader election.
    #[arg(long, default_value = "kube-system", verbatim_doc_comment)]
    pub leader_elect_resource_namespace: String,

    /// Release the lease on graceful shutdown so a standby takes over within one retry period (upstream's ControllerManagerReleaseLeaderElectionLockOnExit).
    #[arg(long, go_bool = true, verbatim_doc_comment)]
    pub leader_elect_release_on_cancel: bool,

    /// While not leading, register the controllers' informers and keep their caches synced (one LIST+WATCH per watched kind) without starting any worker, so a takeover starts reconciling from a warm cache with no new LIST. The cloud provider's Initialize then runs after the controllers' registration, on winning the Lease. This build's own flag, off as upstream.
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub leader_elect_warm_standby: bool,
}

/// Output shape of log lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log pipelines.
    Json,
}

/// klog-compatible verbosity and format.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Logs flags", end_help_heading = true)]
pub struct LoggingOptions {
    /// number for the log level verbosity
    #[arg(short = 'v', long = "v", default_value_t = 0, verbatim_doc_comment)]
    pub verbosity: u8,

    /// Sets the log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, verbatim_doc_comment)]
    pub logging_format: LogFormat,
}

impl GenericOptions {
    /// The gates `--feature-gates` turns on and off, or upstream's error for a bad value.
    pub fn feature_gates(&self) -> Result<FeatureGates, String> {
        FeatureGates::parse(&self.feature_gates)
    }

    /// Every problem with these flags, each saying what to change; empty means valid.
    pub fn validate(&self) -> Vec<String> {
        let mut errors = Vec::new();
        let c = &self.client;
        if !(c.kube_api_qps.is_finite() && c.kube_api_qps > 0.0) {
            errors.push(format!(
                "--kube-api-qps must be greater than 0, got {}",
                c.kube_api_qps
            ));
        }
        if c.kube_api_burst == 0 {
            errors.push("--kube-api-burst must be at least 1".to_string());
        }
        if self.min_resync_period.get().is_zero() {
            errors.push("--min-resync-period must be greater than 0s".to_string());
        }
        if let Err(e) = self.feature_gates() {
            errors.push(e);
        }
        errors.extend(self.debugging.validate());
        errors.extend(self.compat.validate());
        errors.extend(self.leader_election.validate());
        errors.extend(self.serving.validate());
        errors
    }
}

impl LeaderElectionOptions {
    /// client-go's rules: lease duration > renew deadline > retry period × 1.2, lock type `leases`.
    pub fn validate(&self) -> Vec<String> {
        let mut errors = Vec::new();
        if !self.leader_elect {
            return errors;
        }
        let lease = self.leader_elect_lease_duration.get();
        let renew = self.leader_elect_renew_deadline.get();
        let retry = self.leader_elect_retry_period.get();
        if lease <= renew {
            errors.push(format!(
                "--leader-elect-lease-duration ({}) must be greater than --leader-elect-renew-deadline ({})",
                self.leader_elect_lease_duration, self.leader_elect_renew_deadline
            ));
        }
        if retry.is_zero() {
            errors.push("--leader-elect-retry-period must be greater than 0s".to_string());
        } else if renew <= retry.mul_f64(1.2) {
            errors.push(format!(
                "--leader-elect-renew-deadline ({}) must be greater than 1.2 × --leader-elect-retry-period ({})",
                self.leader_elect_renew_deadline,
                GoDuration(retry.mul_f64(1.2))
            ));
        }
        if self.leader_elect_resource_lock != "leases" {
            errors.push(format!(
                "--leader-elect-resource-lock: resourceLock value must be \"leases\", got {:?}",
                self.leader_elect_resource_lock
            ));
        }
        if self.leader_elect_resource_namespace.is_empty() {
            errors.push("--leader-elect-resource-namespace must not be empty".to_string());
        }
        errors
    }

    /// The retry period, for callers that only need the plain duration.
    pub fn retry_period(&self) -> Duration {
        self.leader_elect_retry_period.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse_group;

    fn parse(args: &[&str]) -> GenericOptions {
        parse_group(args).unwrap()
    }

    #[test]
    fn defaults_match_upstream_ccm() {
        let o = parse(&[]);
        assert_eq!(o.controllers, vec!["*"]);
        assert_eq!(o.min_resync_period.get(), Duration::from_secs(12 * 3600));
        assert_eq!(o.client.kube_api_qps, 20.0);
        assert_eq!(o.client.kube_api_burst, 30);
        assert!(o.leader_election.leader_elect);
        assert_eq!(
            o.leader_election.leader_elect_lease_duration.get(),
            Duration::from_secs(15)
        );
        assert_eq!(
            o.leader_election.leader_elect_renew_deadline.get(),
            Duration::from_secs(10)
        );
        assert_eq!(
            o.leader_election.leader_elect_retry_period.get(),
            Duration::from_secs(2)
        );
        assert_eq!(o.leader_election.leader_elect_resource_lock, "leases");
        assert_eq!(
            o.leader_election.leader_elect_resource_namespace,
            "kube-system"
        );
        assert_eq!(o.serving.secure_port, 10258);
        assert_eq!(o.serving.bind_address.to_string(), "0.0.0.0");
        assert!(o.validate().is_empty());
    }

    #[test]
    fn bool_flags_take_go_forms() {
        assert!(
            !parse(&["--leader-elect=false"])
                .leader_election
                .leader_elect
        );
        assert!(parse(&["--leader-elect"]).leader_election.leader_elect);
        assert!(parse(&["--leader-elect=true"]).leader_election.leader_elect);
    }

    #[test]
    fn controllers_split_on_commas() {
        assert_eq!(
            parse(&["--controllers=cloud-node,-route"]).controllers,
            vec!["cloud-node", "-route"]
        );
    }

    #[test]
    fn every_validation_error_is_reported_together() {
        let o = parse(&[
            "--kube-api-qps=0",
            "--kube-api-burst=0",
            "--leader-elect-lease-duration=5s",
            "--leader-elect-renew-deadline=10s",
            "--leader-elect-resource-lock=endpoints",
            "--tls-cert-file=/x",
        ]);
        let errors = o.validate();
        assert_eq!(errors.len(), 5, "{errors:#?}");
        assert!(errors.iter().any(|e| e.contains("--kube-api-qps")));
        assert!(errors.iter().any(|e| e.contains("--kube-api-burst")));
        assert!(
            errors
                .iter()
                .any(|e| e.contains("must be greater than --leader-elect-renew-deadline"))
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("resourceLock value must be \"leases\""))
        );
        assert!(errors.iter().any(|e| e.contains("given together")));
    }

    #[test]
    fn renew_deadline_must_exceed_jittered_retry() {
        let o = parse(&[
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=2s",
        ]);
        assert!(o.validate().iter().any(|e| e.contains("1.2 ×")));
        let off = parse(&["--leader-elect=false", "--leader-elect-renew-deadline=2s"]);
        assert!(off.validate().is_empty());
    }

    #[test]
    fn bad_duration_names_the_flag() {
        let err = parse_group::<GenericOptions>(&["--min-resync-period=12"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--min-resync-period"), "{err}");
        assert!(err.contains("missing unit"), "{err}");
    }
}
