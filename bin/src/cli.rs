//! The binary's flag set: the framework's generic flags, the cloud flags, tracing, and `--dev`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser};
use cloud_controllers::cloud::CloudProviderRegistry;
use cloud_controllers::{CloudContext, options::CloudOptions};
use controller_manager::leader::{LeaderElectionConfig, default_identity};
use controller_manager::manager::{Initializers, ManagerConfig};
use controller_manager::options::GenericOptions;
use controller_manager::telemetry::TelemetryOptions;

/// Name used for the Lease, metrics and the user agent, as upstream.
pub const NAME: &str = "cloud-controller-manager";

#[derive(Parser, Debug)]
#[command(
    name = "cloud-controller-manager",
    version,
    about = "The Cloud controller manager is a daemon that embeds the cloud specific control loops shipped with Kubernetes."
)]
pub struct Cli {
    #[command(flatten)]
    pub cloud: CloudOptions,
    #[command(flatten)]
    pub generic: GenericOptions,
    #[command(flatten)]
    pub telemetry: TelemetryOptions,
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
    /// `--dev` needs no provider flag and no Lease contention; explicit flags still win.
    pub fn apply_dev_defaults(&mut self) {
        if self.cloud.cloud_provider.is_empty() {
            self.cloud.cloud_provider = "fake".to_string();
        }
        if self.cloud.cluster_cidr.is_empty() {
            self.cloud.cluster_cidr = "10.244.0.0/16".to_string();
        }
    }

    /// Every flag error at once, including unknown `--controllers` names.
    pub fn validate(
        &self,
        initializers: &Initializers<CloudContext>,
        providers: &CloudProviderRegistry,
    ) -> Vec<String> {
        let mut errors = self.cloud.validate();
        let name = self.cloud.cloud_provider.trim();
        if !name.is_empty() && !providers.contains(name) {
            let registered = providers.names().join(", ");
            errors.push(if name == "external" {
                format!(
                    "--cloud-provider=external means \"a separate cloud-controller-manager runs the cloud loops\"; this process is that manager, so name the provider it should run: one of {registered}"
                )
            } else {
                format!(
                    "--cloud-provider={name}: unknown cloud provider; registered providers are {registered}"
                )
            });
        }
        errors.extend(self.generic.validate());
        errors.extend(self.telemetry.validate());
        if let Err(e) = controller_manager::manager::ControllerSelection::parse(
            &self.generic.controllers,
            &initializers.known(),
        ) {
            errors.push(e.to_string());
        }
        errors
    }

    /// The manager's settings from the flags.
    pub fn manager_config(&self) -> ManagerConfig {
        let g = &self.generic;
        let mut config = ManagerConfig::new(NAME);
        config.controllers = g.controllers.clone();
        config.controller_start_interval = g.controller_start_interval.get();
        config.min_resync_period = Some(g.min_resync_period.get());
        if g.serving.secure_port != 0 {
            config.admin_addr = Some(SocketAddr::new(
                g.serving.bind_address,
                g.serving.secure_port,
            ));
        }
        let le = &g.leader_election;
        if le.leader_elect {
            config.leader_election = Some(LeaderElectionConfig {
                lease_name: le
                    .leader_elect_resource_name
                    .clone()
                    .unwrap_or_else(|| NAME.to_string()),
                lease_namespace: le.leader_elect_resource_namespace.clone(),
                identity: default_identity(),
                lease_duration: le.leader_elect_lease_duration.get(),
                renew_deadline: le.leader_elect_renew_deadline.get(),
                retry_period: le.leader_elect_retry_period.get(),
                release_on_cancel: le.leader_elect_release_on_cancel,
            });
        }
        config
    }
}
