//! [`AppError`]: why the process could not run or stopped, and the exit status of each.

use std::fmt;
use std::process::ExitCode;

use controller_manager::client::ClientError;
use controller_manager::manager::ManagerError;
use controller_manager::telemetry::TelemetryError;

use crate::cloud::RegistryError;

/// Why the process could not run or stopped with an error; each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Flags were invalid; nothing was started.
    #[error("{}", InvalidFlags(.0))]
    InvalidFlags(Vec<String>),
    /// Logging or trace export could not start.
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
    /// No API client could be built from `--kubeconfig` / `--master` / in-cluster config.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// `--cloud-provider` / `--cloud-config` did not yield a provider.
    #[error(transparent)]
    Provider(#[from] RegistryError),
    /// The cloud has no cluster ID and `--allow-untagged-cloud` is off.
    #[error(
        "no ClusterID found; a ClusterID is required for the cloud provider to function properly. \
         This check can be bypassed by setting --allow-untagged-cloud=true"
    )]
    NoClusterId,
    /// The manager stopped with an error (provider initialize, a controller, the Lease, ...).
    #[error(transparent)]
    Manager(#[from] ManagerError),
}

struct InvalidFlags<'a>(&'a [String]);

impl fmt::Display for InvalidFlags<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in self.0 {
            writeln!(f, "{e}")?;
        }
        write!(
            f,
            "{} invalid flag value(s); nothing was started",
            self.0.len()
        )
    }
}

impl AppError {
    /// Status 2 for flag errors (as clap and upstream's cobra), 1 for everything else, including
    /// lost leadership (upstream exits 1 on "leaderelection lost").
    pub fn exit_code(&self) -> ExitCode {
        match self {
            AppError::InvalidFlags(_) => ExitCode::from(2),
            _ => ExitCode::FAILURE,
        }
    }
}
