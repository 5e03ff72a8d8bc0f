//! Flags of the cloud controllers, with upstream names and defaults, flattenable into any
//! embedder's clap parser next to the framework's generic flags.

use std::path::PathBuf;

use clap::Args;
use controller_manager::options::GoDuration;
use controller_manager::options::{EndHelpHeading, GoBoolArg};

use crate::cloud::{BudgetOptions, MAX_QPS, MIN_QPS, qps_in_range};

/// Cloud controller flags (`cloud-provider` generic group, per-controller groups as upstream).
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Generic flags", end_help_heading = true)]
pub struct CloudOptions {
    /// The provider for cloud services. Empty string for no provider.
    #[arg(
        long,
        default_value = "",
        hide_default_value = true,
        verbatim_doc_comment
    )]
    pub cloud_provider: String,

    /// The path to the cloud provider configuration file. Empty string for no configuration file.
    #[arg(long, verbatim_doc_comment)]
    pub cloud_config: Option<PathBuf>,

    /// Allow the cluster to run without the cluster-id on cloud instances. This is a legacy mode of operation and a cluster-id will be required in the future.
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub allow_untagged_cloud: bool,

    /// The instance prefix for the cluster.
    #[arg(long, default_value = "kubernetes", verbatim_doc_comment)]
    pub cluster_name: String,

    /// CIDR Range for Pods in cluster. Comma separated for dual-stack (one IPv4 and one IPv6).
    #[arg(
        long,
        default_value = "",
        hide_default_value = true,
        verbatim_doc_comment
    )]
    pub cluster_cidr: String,

    /// Should CIDRs for Pods be allocated and set on the cloud provider.
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub allocate_node_cidrs: bool,

    /// Should CIDRs allocated by allocate-node-cidrs be configured on the cloud provider.
    #[arg(long, go_bool = true, verbatim_doc_comment)]
    pub configure_cloud_routes: bool,

    /// The period for reconciling routes created for Nodes by cloud provider.
    #[arg(long, default_value = "10s", verbatim_doc_comment)]
    pub route_reconciliation_period: GoDuration,

    /// The period for syncing NodeStatus in cloud-node-lifecycle-controller.
    #[arg(long, default_value = "5s", verbatim_doc_comment)]
    pub node_monitor_period: GoDuration,

    /// How long an instance must be reported missing by the cloud, on consecutive checks, before cloud-node-lifecycle-controller deletes its Node. 0s deletes on the first report, as upstream.
    #[arg(long, default_value = "30s", verbatim_doc_comment)]
    pub node_deletion_grace_period: GoDuration,

    /// Specifies how often the controller updates nodes' status.
    #[arg(
        long,
        default_value = "5m0s",
        help_heading = "Misc flags",
        verbatim_doc_comment
    )]
    pub node_status_update_frequency: GoDuration,

    /// The number of services that are allowed to sync concurrently. Larger number = more responsive service management, but more CPU (and network) load
    #[arg(
        long,
        default_value_t = 1,
        help_heading = "Service-lb-controller flags",
        verbatim_doc_comment
    )]
    pub concurrent_service_syncs: u32,

    /// How long after a node change load balancers are updated with the new node set; the changes in between are folded into that one update, so a burst (a scale-up, a rolling replacement) costs each load balancer at most one update per period. 0s answers every change at once, as upstream does.
    #[arg(
        long,
        default_value = "2s",
        help_heading = "Service-lb-controller flags",
        verbatim_doc_comment
    )]
    pub node_sync_batch_period: GoDuration,

    /// The longest wait between two load-balancer updates while the node set keeps changing: the first change of a burst is answered after --node-sync-batch-period, each next answer after twice the wait before it, up to this; once the node set has been still for --node-sync-batch-period, what is pending is answered and the wait is back to that period. A scale-up of any length so costs each load balancer a few updates (nine for a steady 300 s one). Not shorter than --node-sync-batch-period; equal to it answers once per period for as long as the set changes.
    #[arg(
        long,
        default_value = "1m0s",
        help_heading = "Service-lb-controller flags",
        verbatim_doc_comment
    )]
    pub node_sync_max_batch_period: GoDuration,

    /// Number of workers concurrently synchronizing nodes.
    #[arg(
        long,
        default_value_t = 1,
        help_heading = "Cloud-node-controller flags",
        verbatim_doc_comment
    )]
    pub concurrent_node_syncs: u32,

    /// Number of workers concurrently updating node statuses. 0 uses --concurrent-node-syncs.
    #[arg(
        long,
        default_value_t = 0,
        help_heading = "Cloud-node-controller flags",
        verbatim_doc_comment
    )]
    pub concurrent_node_status_updates: u32,

    // ---- The cloud call budget (not upstream; limits off by default, as upstream) ----
    /// Cloud provider calls per second, all controllers and methods together; calls over it wait. 0 means unlimited, as upstream; otherwise from 0.001 to 1000000.
    #[arg(
        long,
        default_value_t = 0.0,
        help_heading = "Cloud call budget flags",
        verbatim_doc_comment
    )]
    pub cloud_api_qps: f64,

    /// Cloud provider calls allowed at once above --cloud-api-qps. 0 means --cloud-api-qps rounded up.
    #[arg(
        long,
        default_value_t = 0,
        help_heading = "Cloud call budget flags",
        verbatim_doc_comment
    )]
    pub cloud_api_burst: u32,

    /// Cloud provider calls in flight at once, all controllers together; more wait. 0 means unlimited, as upstream.
    #[arg(
        long,
        default_value_t = 0,
        help_heading = "Cloud call budget flags",
        verbatim_doc_comment
    )]
    pub cloud_api_max_in_flight: u32,

    /// When the cloud answers a call with retry-after (a 429), hold back every caller of that method until then, not only the object that got the answer, and let them call one at a time until the cloud accepts calls again. Set it to false for a provider whose retry-after is about one object (a load balancer still provisioning), as upstream leaves each object to retry on its own.
    #[arg(
        long,
        go_bool = true,
        help_heading = "Cloud call budget flags",
        verbatim_doc_comment
    )]
    pub cloud_api_pause_on_retry: bool,
}

impl CloudOptions {
    /// Every problem with these flags, each saying what to change; empty means valid.
    ///
    /// Unlike upstream, zero worker counts are rejected: upstream silently runs zero workers.
    pub fn validate(&self) -> Vec<String> {
        let mut errors = Vec::new();
        if self.cloud_provider.trim().is_empty() {
            errors.push("--cloud-provider cannot be empty".to_string());
        }
        if self.concurrent_service_syncs == 0 {
            errors.push("--concurrent-service-syncs must be at least 1".to_string());
        }
        if self.concurrent_node_syncs == 0 {
            errors.push("--concurrent-node-syncs must be at least 1".to_string());
        }
        for (flag, value) in [
            ("--node-monitor-period", self.node_monitor_period),
            (
                "--node-status-update-frequency",
                self.node_status_update_frequency,
            ),
            (
                "--route-reconciliation-period",
                self.route_reconciliation_period,
            ),
        ] {
            if value.get().is_zero() {
                errors.push(format!("{flag} must be greater than 0s"));
            }
        }
        if self.node_sync_max_batch_period.get() < self.node_sync_batch_period.get() {
            errors.push(format!(
                "--node-sync-max-batch-period ({}) must not be shorter than --node-sync-batch-period ({}): raise it, or lower the batch period",
                self.node_sync_max_batch_period, self.node_sync_batch_period
            ));
        }
        if self.cluster_name.is_empty() {
            errors.push("--cluster-name must not be empty".to_string());
        }
        if !(self.cloud_api_qps == 0.0 || qps_in_range(self.cloud_api_qps)) {
            errors.push(format!(
                "--cloud-api-qps must be 0 (unlimited) or from {MIN_QPS} to {MAX_QPS} calls per second, got {:?}",
                self.cloud_api_qps
            ));
        } else if self.cloud_api_burst > 0 && self.cloud_api_qps == 0.0 {
            errors.push(
                "--cloud-api-burst needs --cloud-api-qps: without a rate there is nothing to burst above"
                    .to_string(),
            );
        }
        errors
    }

    /// The cloud call budget these flags describe.
    pub fn budget_options(&self) -> BudgetOptions {
        BudgetOptions {
            qps: self.cloud_api_qps,
            burst: self.cloud_api_burst,
            max_in_flight: self.cloud_api_max_in_flight as usize,
            pause_on_retry: self.cloud_api_pause_on_retry,
        }
    }

    /// Workers for the periodic node address refresh, with upstream's fallback.
    pub fn node_status_update_workers(&self) -> usize {
        let n = if self.concurrent_node_status_updates == 0 {
            self.concurrent_node_syncs
        } else {
            self.concurrent_node_status_updates
        };
        n.max(1) as usize
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use controller_manager::options::parse_group;

    use super::*;

    fn parse(args: &[&str]) -> CloudOptions {
        parse_group(args).unwrap()
    }

    #[test]
    fn defaults_match_upstream() {
        let o = parse(&["--cloud-provider=fake"]);
        assert_eq!(o.cluster_name, "kubernetes");
        assert_eq!(o.cluster_cidr, "");
        assert!(!o.allocate_node_cidrs);
        assert!(o.configure_cloud_routes);
        assert_eq!(o.route_reconciliation_period.get(), Duration::from_secs(10));
        assert_eq!(o.node_monitor_period.get(), Duration::from_secs(5));
        assert_eq!(
            o.node_status_update_frequency.get(),
            Duration::from_secs(300)
        );
        assert_eq!(o.concurrent_service_syncs, 1);
        assert_eq!(o.node_sync_batch_period.get(), Duration::from_secs(2));
        assert_eq!(
            parse(&["--cloud-provider=fake", "--node-sync-batch-period=0s"])
                .node_sync_batch_period
                .get(),
            Duration::ZERO,
            "0s (upstream behaviour) is valid"
        );
        assert_eq!(o.concurrent_node_syncs, 1);
        assert_eq!(o.concurrent_node_status_updates, 0);
        assert_eq!(o.node_status_update_workers(), 1);
        assert_eq!(
            o.budget_options(),
            BudgetOptions {
                pause_on_retry: true,
                ..BudgetOptions::default()
            },
            "no rate or in-flight limit (upstream); the 429 pause is ours, on by default"
        );
        assert!(o.validate().is_empty());
    }

    #[test]
    fn the_node_sync_cap_defaults_to_a_minute_and_is_never_below_the_batch_period() {
        let o = parse(&["--cloud-provider=fake"]);
        assert_eq!(o.node_sync_max_batch_period.get(), Duration::from_secs(60));
        for ok in [
            [
                "--node-sync-batch-period=2s",
                "--node-sync-max-batch-period=2s",
            ],
            [
                "--node-sync-batch-period=0s",
                "--node-sync-max-batch-period=0s",
            ],
            [
                "--node-sync-batch-period=5s",
                "--node-sync-max-batch-period=10m",
            ],
        ] {
            let o = parse(&["--cloud-provider=fake", ok[0], ok[1]]);
            assert!(o.validate().is_empty(), "{ok:?}: {:?}", o.validate());
        }
        let errors = parse(&[
            "--cloud-provider=fake",
            "--node-sync-batch-period=30s",
            "--node-sync-max-batch-period=10s",
        ])
        .validate();
        assert_eq!(
            errors,
            [
                "--node-sync-max-batch-period (10s) must not be shorter than --node-sync-batch-period (30s): raise it, or lower the batch period"
            ]
        );
        // The default cap under a longer batch period is an error too, not a silent raise.
        let errors = parse(&["--cloud-provider=fake", "--node-sync-batch-period=2m"]).validate();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("(1m0s)"), "{errors:?}");
    }

    #[test]
    fn budget_flags_parse_and_bad_ones_say_what_to_change() {
        let o = parse(&[
            "--cloud-provider=fake",
            "--cloud-api-qps=2.5",
            "--cloud-api-burst=5",
            "--cloud-api-max-in-flight=8",
            "--cloud-api-pause-on-retry",
        ]);
        assert!(o.validate().is_empty());
        let b = o.budget_options();
        assert_eq!((b.qps, b.burst, b.max_in_flight), (2.5, 5, 8));
        assert!(b.pause_on_retry);
        assert!(
            parse(&["--cloud-provider=fake"])
                .budget_options()
                .pause_on_retry,
            "on by default"
        );
        assert!(
            !parse(&["--cloud-provider=fake", "--cloud-api-pause-on-retry=false"])
                .budget_options()
                .pause_on_retry
        );
        // Negative, not finite, so slow a call waits for ages, or beyond any cloud's rate.
        for qps in ["-1", "NaN", "inf", "1e-300", "0.0009", "1000001"] {
            let errors =
                parse(&["--cloud-provider=fake", &format!("--cloud-api-qps={qps}")]).validate();
            assert_eq!(errors.len(), 1, "{qps}: {errors:?}");
            assert!(
                errors[0].starts_with(
                    "--cloud-api-qps must be 0 (unlimited) or from 0.001 to 1000000 calls per second, got "
                ),
                "{qps}: {errors:?}"
            );
        }
        for qps in ["0", "0.001", "1000000"] {
            let flag = format!("--cloud-api-qps={qps}");
            assert!(
                parse(&["--cloud-provider=fake", &flag])
                    .validate()
                    .is_empty(),
                "{qps}"
            );
        }
        let errors = parse(&["--cloud-provider=fake", "--cloud-api-burst=3"]).validate();
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("--cloud-api-burst needs --cloud-api-qps"));
    }

    #[test]
    fn cloud_provider_is_required() {
        assert_eq!(
            parse(&[]).validate(),
            vec!["--cloud-provider cannot be empty"]
        );
    }

    #[test]
    fn zero_workers_and_periods_are_errors() {
        let errors = parse(&[
            "--cloud-provider=fake",
            "--concurrent-service-syncs=0",
            "--concurrent-node-syncs=0",
            "--node-monitor-period=0s",
        ])
        .validate();
        assert_eq!(errors.len(), 3, "{errors:#?}");
    }

    #[test]
    fn status_workers_fall_back_to_node_syncs() {
        let o = parse(&["--cloud-provider=fake", "--concurrent-node-syncs=4"]);
        assert_eq!(o.node_status_update_workers(), 4);
        let o = parse(&[
            "--cloud-provider=fake",
            "--concurrent-node-status-updates=7",
        ]);
        assert_eq!(o.node_status_update_workers(), 7);
    }
}
