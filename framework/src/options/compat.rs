//! Generic upstream flags whose behaviour this build has differently or not at all, so a Go
//! controller-manager's manifest starts unchanged: each is accepted where its meaning holds here
//! and refused by [`CompatOptions::validate`], naming the flag, only where this build lacks what
//! the value asks for (leader migration, per-file log verbosity).

use std::path::PathBuf;

use clap::{ArgAction, Args};

use super::GoDuration;

/// Content types `--kube-api-content-type` accepts.
const CONTENT_TYPES: &[&str] = &["application/json", "application/vnd.kubernetes.protobuf"];

/// Leader-migration, content-type and log flags of upstream's generic options.
#[derive(Args, Clone, Debug)]
pub struct CompatOptions {
    /// Leader migration between two managers; not implemented here.
    #[arg(
        long,
        action = ArgAction::Set,
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        help_heading = "Leader-migration flags",
        help = "Whether to enable controller leader migration. Refused when true: this build has no leader migration."
    )]
    pub enable_leader_migration: bool,

    /// Leader migration configuration; read only with `--enable-leader-migration`.
    #[arg(
        long,
        help_heading = "Leader-migration flags",
        help = "Path to the config file for controller leader migration, or empty to use the value that reflects default configuration of the controller manager. The config file should be of type LeaderMigrationConfiguration, group controllermanager.config.k8s.io, version v1alpha1. Only read with --enable-leader-migration."
    )]
    pub leader_migration_config: Option<PathBuf>,

    /// Wire format of requests; this build always sends JSON.
    #[arg(
        long,
        default_value = "application/json",
        help_heading = "Generic flags",
        help = "Content type of requests sent to apiserver. application/json or application/vnd.kubernetes.protobuf (upstream's default); requests are JSON either way in this build."
    )]
    pub kube_api_content_type: String,

    /// Upstream's log buffer flush period; log lines are written unbuffered here.
    #[arg(
        long,
        default_value = "5s",
        help_heading = "Logs flags",
        help = "Maximum number of seconds between log flushes. Log lines are written unbuffered here, so any value holds."
    )]
    pub log_flush_frequency: GoDuration,

    /// klog's per-file verbosity; only the empty value is possible here.
    #[arg(
        long,
        default_value = "",
        hide_default_value = true,
        help_heading = "Logs flags",
        help = "comma-separated list of pattern=N settings for file-filtered logging (only works for text log format). Refused when not empty: use -v."
    )]
    pub vmodule: String,
}

impl CompatOptions {
    /// One message per flag whose value asks for something this build cannot do.
    pub fn validate(&self) -> Vec<String> {
        let mut errors = Vec::new();
        if self.enable_leader_migration {
            errors.push(
                "--enable-leader-migration=true: this build has no leader migration; migrate by running one manager at a time, and remove the flag".to_string(),
            );
        }
        if !CONTENT_TYPES.contains(&self.kube_api_content_type.as_str()) {
            errors.push(format!(
                "--kube-api-content-type {:?} is not supported; use one of {}",
                self.kube_api_content_type,
                CONTENT_TYPES.join(", ")
            ));
        }
        if !self.vmodule.trim().is_empty() {
            errors.push(format!(
                "--vmodule={}: per-file log verbosity is not supported here; remove it and use -v",
                self.vmodule
            ));
        }
        errors
    }
}
