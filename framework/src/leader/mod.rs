//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's `leaderelection` semantics,
//! so that of several replicas exactly one runs the controllers.
//!
//! - `config`: durations, identity and their validation (`lease > renew deadline > 1.2 × retry`).
//! - `record`: the leader record kept in the Lease spec and how it maps to and from the object.
//! - `store`: the three Lease calls the elector makes (get, create, replace), behind a trait so the
//!   algorithm can be tested against injected lease states with a paused clock.
//! - `elector`: acquire, renew, release and the [`LeaderElector::run`] loop.
//! - `status`: what the rest of the process sees — a health check and the
//!   `leader_election_master_status` gauge.
//!
//! Like client-go, expiry is judged by the *local* monotonic clock at the moment the record was last
//! seen to change, never by the remote timestamps, so clock skew between replicas does not matter
//! (skew *rate* does; the lease/renew ratio is the tolerated rate ratio). There is no fencing.
//!
//! Differences from client-go, on purpose:
//! - on shutdown the elector keeps renewing while the guarded work drains and releases the lease only
//!   after that work has finished (client-go releases as soon as the context ends and warns that two
//!   processes may then act at once);
//! - release re-reads the Lease and retries on conflict, and never clears a lease someone else holds;
//! - on lost leadership `run` returns only once the guarded work has stopped (or been aborted
//!   within lease duration − renew deadline), so an embedder that keeps its process alive never
//!   has two leaders acting at once.

mod config;
mod elector;
pub(crate) mod record;
mod status;
pub(crate) mod store;

pub use config::{LeaderElectionConfig, default_identity, host_name};
pub use elector::LeaderElector;
pub use status::{HEALTH_TOLERANCE, LeaderMetrics, LeaderState, LeaderStatus};

/// Why leader election could not start or stopped leading; the binary exits non-zero on either.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The durations or names cannot work together; every problem is listed.
    #[error("invalid leader election configuration: {}", .0.join("; "))]
    InvalidConfig(Vec<String>),
    /// The lease was not renewed within the renew deadline; another replica may now lead, so this one
    /// must stop acting at once.
    #[error("leadership of lease {namespace}/{name} lost: not renewed within {renew_deadline:?}")]
    LeadershipLost {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The deadline that passed.
        renew_deadline: std::time::Duration,
    },
}
