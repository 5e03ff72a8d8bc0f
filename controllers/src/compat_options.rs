//! Cloud flags upstream keeps for other controllers or for history, accepted so manifests start
//! unchanged; none changes what the stock controllers do, as upstream.

use clap::Args;
use controller_manager::options::EndHelpHeading;
use controller_manager::options::GoDuration;

/// `--cidr-allocator-type`, `--external-cloud-volume-plugin`, `--node-sync-period`.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Generic flags", end_help_heading = true)]
pub struct CloudCompatOptions {
    /// Type of CIDR allocator to use. Read only by a node IPAM controller a distro adds; the stock controllers ignore it, as upstream.
    #[arg(long, default_value = "RangeAllocator", verbatim_doc_comment)]
    pub cidr_allocator_type: String,

    /// The plugin to use when cloud provider is set to external. Can be empty, should only be set when cloud-provider is external. Not used by the cloud controllers, as upstream.
    #[arg(
        long,
        default_value = "",
        hide_default_value = true,
        verbatim_doc_comment
    )]
    pub external_cloud_volume_plugin: String,

    /// This flag is deprecated and will be removed in future releases. See node-monitor-period for Node health checking or route-reconciliation-period for cloud provider's route configuration settings.
    #[arg(long, default_value = "0s", verbatim_doc_comment)]
    pub node_sync_period: GoDuration,
}
