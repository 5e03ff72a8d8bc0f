//! The admin HTTP server: `/healthz`, `/readyz`, `/livez` with the Kubernetes health output format,
//! and `/metrics` in OpenMetrics text, so probes and scrapers written for upstream components work.
//!
//! - `health`: named checks and the upstream rendering (`ok`, `[+]name ok`, `[-]name failed:
//!   reason withheld`, `?verbose`, `?exclude=`), independent of HTTP so it is unit-tested directly.
//! - `listener`: the one place a listening socket is made, plain or wrapped in TLS.
//! - `server`: the axum routes and the serve loop with graceful shutdown.
//! - `tls`: the serving certificate: `--tls-cert-file`/`--tls-private-key-file`, or a self-signed
//!   pair made at start (kept in `--cert-dir` when given), as upstream's secure serving.
//!
//! [`AdminServer::with_tls`] turns on HTTPS; the manager does so when
//! [`ManagerConfig::admin_tls`](crate::manager::ManagerConfig::admin_tls) is set, which the
//! binary does (except in `--dev` without certificate flags), as upstream serves `--secure-port`
//! over HTTPS.
//!
//! Differences from upstream: upstream CCM guards its endpoints with delegated authentication and
//! authorization (TokenReview/SubjectAccessReview; `/healthz` always allowed); this serves
//! `/healthz`, `/readyz`, `/livez` and `/metrics` to any client that completes the TLS handshake.

mod health;
mod listener;
mod server;
mod tls;

pub use health::{HealthChecks, HealthReport};
pub use server::AdminServer;
pub use tls::{SelfSignedPair, ServingCert, TlsError};

/// Why the admin server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The address is in use or not allowed; pick another `--bind-address`/`--secure-port`.
    #[error("cannot listen on {addr}: {source} (choose another bind address or port)")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Accepting or serving connections failed.
    #[error("admin server failed: {0}")]
    Serve(#[source] std::io::Error),
    /// The serving certificate could not be loaded or made.
    #[error(transparent)]
    Tls(#[from] TlsError),
}
