//! Test support for this crate's and downstream crates' end-to-end tests (feature `testing`):
//! kube-testenv, a manager run in-process ([`ManagerTask`]) or as a child process
//! ([`ManagerProcess`]), waits that end at once when the manager exits ([`WaitError`]), and
//! request counting over kube-testenv's request log ([`Requests`]), and an embedder's webhooks
//! installed into kube-testenv as envtest installs them ([`WebhookInstall`]).
//!
//! ```toml
//! [dev-dependencies]
//! controller-manager = { path = "../cloud-controller-manager/framework", features = ["testing"] }
//! ```
//!
//! ```no_run
//! # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
//! use controller_manager::manager::{Initializers, Manager, ManagerConfig};
//! use controller_manager::testing::{ManagerTask, Requests, TestEnv};
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::Api;
//!
//! let env = TestEnv::start().await?;
//! let manager = Manager::new(ManagerConfig::new("my-test"), env.client(), ())
//!     .with_initializers(Initializers::new());
//! let mut manager = ManagerTask::start(manager);
//! let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), "default");
//! // Fails with the manager's error as soon as it exits, or with the last state seen after the
//! // timeout (30 s unless `with_timeout` says otherwise).
//! manager
//!     .wait_for(&configmaps, "copy", "the copy is written", |cm: Option<&ConfigMap>| cm.is_some())
//!     .await?;
//! assert_eq!(Requests::of(&env).verb("watch").resource("configmaps").count(), 1);
//! manager.stop().await?;
//! # Ok(())
//! # }
//! ```
//!
//! The errors' `Debug` is their `Display`, so `.unwrap()` and `-> Result<(), Box<dyn Error>>`
//! tests print the whole message (what was awaited, how the manager exited or what was last
//! seen, and a child process's logs).

mod exit;
mod process;
mod requests;
mod task;
mod wait;
mod webhooks;

use std::time::Duration;

pub use exit::ManagerExit;
pub use kube_testenv::{self, RequestRecord, TestEnv};
pub use process::ManagerProcess;
pub use requests::Requests;
pub use task::ManagerTask;
pub use wait::{Logs, StopOutcome, WaitError};
pub use webhooks::{InstalledWebhooks, WebhookInstall, WebhookInstallError};

/// How long a wait or a stop takes before it fails, unless `with_timeout` says otherwise:
/// generous, since a loaded 2-core CI machine must still finish well within it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Leader election on Lease `lease` in `kube-system` as `identity`, scaled down so a takeover or
/// a shard handover in a test takes seconds: 2 s lease, 1.5 s renew deadline, 0.2 s retry.
pub fn fast_leader_election(lease: &str, identity: &str) -> crate::leader::LeaderElectionConfig {
    crate::leader::LeaderElectionConfig::new("kube-system", lease, identity).with_durations(
        Duration::from_secs(2),
        Duration::from_millis(1500),
        Duration::from_millis(200),
    )
}
