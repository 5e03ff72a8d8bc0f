//! The admin HTTP server: `/healthz`, `/readyz`, `/livez` with the Kubernetes health output format,
//! and `/metrics` in OpenMetrics text, so probes and scrapers written for upstream components work.
//!
//! - `health`: named checks and the upstream rendering (`ok`, `[+]name ok`, `[-]name failed:
//!   reason withheld`, `?verbose`, `?exclude=`), independent of HTTP so it is unit-tested directly.
//! - `listener`: the one place a listening socket is made (plain TCP today; TLS goes here).
//! - `server`: the axum routes and the serve loop with graceful shutdown.
//!
//! Differences from upstream: upstream CCM serves only `/healthz` over HTTPS with delegated
//! authentication and authorization; this serves `/healthz`, `/readyz` and `/livez` over plain HTTP
//! without authentication for now.

mod health;
mod listener;
mod server;

pub use health::{HealthChecks, HealthReport};
pub use server::AdminServer;

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
}
