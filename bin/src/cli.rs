//! The binary's flag set: the stock cloud-controller-manager flags plus `--dev`.

use std::path::PathBuf;

use clap::{Args, Parser};
use cloud_controllers::app::CloudManagerOptions;

/// Name used for the Lease, metrics, the user agent and the trace service, as upstream.
pub const NAME: &str = "cloud-controller-manager";

#[derive(Parser, Debug)]
#[command(
    name = "cloud-controller-manager",
    version,
    about = "The Cloud controller manager is a daemon that embeds the cloud specific control loops shipped with Kubernetes."
)]
pub struct Cli {
    #[command(flatten)]
    pub options: CloudManagerOptions,
    #[command(flatten)]
    pub dev: DevOptions,
}

/// No-cluster mode for newcomers and demos.
#[derive(Args, Debug, Clone)]
pub struct DevOptions {
    /// Run against an embedded API server and the fake cloud, with sample nodes and a Service.
    #[arg(long, help_heading = "Development flags")]
    pub dev: bool,
    /// Where `--dev` writes the kubeconfig for kubectl.
    #[arg(
        long,
        default_value = "/tmp/cloud-controller-manager-dev.kubeconfig",
        help_heading = "Development flags"
    )]
    pub dev_kubeconfig: PathBuf,
    /// Port of the embedded API server in `--dev` (0 picks a free one).
    #[arg(long, default_value_t = 0, help_heading = "Development flags")]
    pub dev_api_port: u16,
}

impl Cli {
    /// `--dev` needs no provider flag and gets a pod network for the route controller; explicit
    /// flags still win.
    pub fn apply_dev_defaults(&mut self) {
        let cloud = &mut self.options.cloud;
        if cloud.cloud_provider.is_empty() {
            cloud.cloud_provider = "fake".to_string();
        }
        if cloud.cluster_cidr.is_empty() {
            cloud.cluster_cidr = "10.244.0.0/16".to_string();
        }
    }
}
