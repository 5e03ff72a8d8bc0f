//! Generic upstream flags whose behaviour this build has differently or not at all, so a Go
//! controller-manager's manifest starts unchanged: each is accepted where its meaning holds here
//! and refused by [`CompatOptions::validate`], naming the flag, only where this build lacks what
//! the value asks for (leader migration, per-file log verbosity).

use std::path::PathBuf;

use super::{EndHelpHeading, GoBoolArg};
use clap::Args;

use super::GoDuration;

/// Content types `--kube-api-content-type` accepts.
const CONTENT_TYPES: &[&str] = &["application/json", "application/vnd.kubernetes.protobuf"];

/// Leader-migration, content-type and log flags of upstream's generic options.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Leader-migration flags", end_help_heading = true)]
pub struct CompatOptions {
    /// Whether to enable controller leader migration. Refused when true: this build has no leader migration.
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub enable_leader_migration: bool,

    /// Path to the config file for controller leader migration, or empty to use the value that reflects default configuration of the controller manager. The config file should be of type LeaderMigrationConfiguration, group controllermanager.config.k8s.io, version v1alpha1. Only read with --enable-leader-migration.
    #[arg(long, verbatim_doc_comment)]
    pub leader_migration_config: Option<PathBuf>,

    /// Content type of requests sent to apiserver. application/json or application/vnd.kubernetes.protobuf (upstream's default); requests are JSON either way in this build.
    #[arg(
        long,
        default_value = "application/json",
        help_heading = "Generic flags",
        verbatim_doc_comment
    )]
    pub kube_api_content_type: String,

    /// Maximum number of seconds between log flushes. Log lines are written unbuffered here, so any value holds.
    #[arg(
        long,
        default_value = "5s",
        help_heading = "Logs flags",
        verbatim_doc_comment
    )]
    pub log_flush_frequency: GoDuration,

    /// comma-separated list of pattern=N settings for file-filtered logging (only works for text log format). Refused when not empty: use -v.
    #[arg(
        long,
        default_value = "",
        hide_default_value = true,
        help_heading = "Logs flags",
        verbatim_doc_comment
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
