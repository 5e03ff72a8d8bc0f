//! Cloud flags upstream keeps for other controllers or for history, accepted so manifests start
//! unchanged; none changes what the stock controllers do, as upstream.

use clap::Args;
use controller_manager::options::GoDuration;

/// `--cidr-allocator-type`, `--external-cloud-volume-plugin`, `--node-sync-period`.
#[derive(Args, Clone, Debug)]
pub struct CloudCompatOptions {
    /// Read only by node IPAM controllers, which the stock set does not include.
    #[arg(
        long,
        default_value = "RangeAllocator",
        help_heading = "Generic flags",
        help = "Type of CIDR allocator to use. Read only by a node IPAM controller a distro adds; the stock controllers ignore it, as upstream."
    )]
    pub cidr_allocator_type: String,

    /// Read only by in-tree volume controllers, none of which runs here.
    #[arg(
        long,
        default_value = "",
        hide_default_value = true,
        help_heading = "Generic flags",
        help = "The plugin to use when cloud provider is set to external. Can be empty, should only be set when cloud-provider is external. Not used by the cloud controllers, as upstream."
    )]
    pub external_cloud_volume_plugin: String,

    /// Deprecated no-op upstream too.
    #[arg(
        long,
        default_value = "0s",
        help_heading = "Generic flags",
        help = "This flag is deprecated and will be removed in future releases. See node-monitor-period for Node health checking or route-reconciliation-period for cloud provider's route configuration settings."
    )]
    pub node_sync_period: GoDuration,
}
