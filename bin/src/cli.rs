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
    /// `--dev` serves its admin port over plain HTTP, so the demo's
    /// `curl http://localhost:10258/metrics` just works, unless a certificate flag
    /// (`--cert-dir`, `--tls-cert-file`) asks for HTTPS.
    pub fn dev_admin_over_http(&self) -> bool {
        let serving = &self.options.generic.serving;
        self.dev.dev && serving.tls_cert_file.is_none() && serving.cert_dir.is_none()
    }

    /// The flags `--dev` would have to ignore: it runs against its own embedded API server and
    /// the fake cloud, so a cluster, a config file or another provider named beside it is a
    /// mistake to report, not to drop silently.
    pub fn dev_conflicts(&self) -> Vec<String> {
        if !self.dev.dev {
            return Vec::new();
        }
        let client = &self.options.generic.client;
        let cloud = &self.options.cloud;
        let named = [
            ("--kubeconfig", client.kubeconfig.is_some()),
            ("--master", client.master.is_some()),
            ("--cloud-config", cloud.cloud_config.is_some()),
            (
                "--cloud-provider",
                !cloud.cloud_provider.is_empty() && cloud.cloud_provider != "fake",
            ),
        ];
        named
            .into_iter()
            .filter(|(_, given)| *given)
            .map(|(flag, _)| {
                format!(
                    "{flag} cannot be used with --dev, which runs against its own embedded API server and the fake cloud; drop one of them"
                )
            })
            .collect()
    }

    /// `--dev` needs no provider flag and gets a pod network for the route controller; explicit
    /// flags still win. Its admin port (plain HTTP, unauthenticated) listens on loopback only:
    /// an unspecified `--bind-address` (`0.0.0.0`, `::`) becomes `127.0.0.1`.
    pub fn apply_dev_defaults(&mut self) {
        let serving = &mut self.options.generic.serving;
        if serving.bind_address.is_unspecified() {
            serving.bind_address = std::net::Ipv4Addr::LOCALHOST.into();
        }
        let cloud = &mut self.options.cloud;
        if cloud.cloud_provider.is_empty() {
            cloud.cloud_provider = "fake".to_string();
        }
        if cloud.cluster_cidr.is_empty() {
            cloud.cluster_cidr = "10.244.0.0/16".to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn cli(args: &[&str]) -> Cli {
        Cli::parse_from(std::iter::once("cloud-controller-manager").chain(args.iter().copied()))
    }

    #[test]
    fn dev_serves_plain_http_unless_a_certificate_flag_is_given() {
        assert!(cli(&["--dev"]).dev_admin_over_http());
        assert!(!cli(&["--dev", "--cert-dir=/tmp/ccm"]).dev_admin_over_http());
        assert!(
            !cli(&[
                "--dev",
                "--tls-cert-file=/tmp/tls.crt",
                "--tls-private-key-file=/tmp/tls.key"
            ])
            .dev_admin_over_http()
        );
        assert!(
            !cli(&["--cloud-provider=fake"]).dev_admin_over_http(),
            "only --dev"
        );
    }

    #[test]
    fn dev_refuses_the_flags_it_would_ignore() {
        assert!(
            cli(&["--dev", "--cloud-provider=fake"])
                .dev_conflicts()
                .is_empty()
        );
        assert!(
            cli(&["--kubeconfig=/k", "--cloud-config=/c"])
                .dev_conflicts()
                .is_empty()
        );
        let refused = cli(&[
            "--dev",
            "--kubeconfig=/k",
            "--master=https://x",
            "--cloud-config=/nonexistent",
            "--cloud-provider=other",
        ])
        .dev_conflicts();
        let flags: Vec<&str> = refused
            .iter()
            .map(|e| e.split(' ').next().unwrap())
            .collect();
        assert_eq!(
            flags,
            [
                "--kubeconfig",
                "--master",
                "--cloud-config",
                "--cloud-provider"
            ]
        );
        assert!(refused[0].ends_with("drop one of them"), "{}", refused[0]);
    }

    #[test]
    fn dev_binds_the_admin_port_to_loopback() {
        let bound = |args: &[&str]| {
            let mut c = cli(args);
            c.apply_dev_defaults();
            c.options.generic.serving.bind_address.to_string()
        };
        assert_eq!(bound(&["--dev"]), "127.0.0.1");
        assert_eq!(bound(&["--dev", "--bind-address=::"]), "127.0.0.1");
        assert_eq!(bound(&["--dev", "--bind-address=::1"]), "::1");
    }
}
