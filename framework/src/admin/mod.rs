//! The admin HTTP server: `/healthz`, `/readyz`, `/livez` with the Kubernetes health output format,
//! `/metrics` and `/metrics/slis` in OpenMetrics text, `/configz` and, with `--profiling`,
//! `/debug/pprof` (CPU and heap profiles in pprof protobuf), behind upstream's
//! delegated authentication and authorization, so probes, scrapers and RBAC written for
//! upstream components work.
//!
//! - `health`: named checks and the upstream rendering (`ok`, `[+]name ok`, `[-]name failed:
//!   reason withheld`, `?verbose`, `?exclude=`), independent of HTTP so it is unit-tested directly.
//! - `server`: the axum routes on a [`crate::serving::Server`], which owns the listening socket,
//!   TLS and certificate reloading, HTTP/1.1 and HTTP/2, the connection limits and the graceful
//!   shutdown; `slis`, `configz`: those two endpoints.
//! - `pprof`: the `/debug/pprof` routes over [`crate::profiling`]'s profilers.
//! - `auth`: delegated authentication (front proxy, client certificates, TokenReview) and
//!   authorization (`system:masters`, always-allowed paths, SubjectAccessReview).
//!
//! [`AdminServer::secure`] turns on HTTPS and, with [`AdminOptions::auth`], delegated auth; the
//! manager does so when [`ManagerConfig::admin_tls`](crate::manager::ManagerConfig::admin_tls)
//! is set, which the binary does (except in `--dev` without certificate flags), as upstream
//! serves `--secure-port` over HTTPS. Over plain HTTP nothing is authenticated.
//!
//! The serving types the admin server's configuration names are re-exported here, as before
//! they moved to [`crate::serving`] and [`crate::profiling`].

mod auth;
mod configz;
mod health;
mod pprof;
mod server;
mod slis;
mod text;

use std::sync::Arc;

pub use crate::options::AllowPaths;
pub use crate::profiling::{DEFAULT_PROFILE_SECONDS, HeapProfiler, MAX_PROFILE_SECONDS, Profiling};
pub use crate::serving::{
    ConnectionLimits, SelfSignedPair, ServingCert, SniCertKey, SocketSharing, TlsError, TlsSettings,
};
pub use auth::{AuthSetupError, DelegatedAuth, DelegatedAuthConfig, RequestHeaderFlags, UserInfo};
pub use configz::Configz;
pub use health::{HealthChecks, HealthReport};
pub use server::AdminServer;
#[cfg(feature = "testing")]
pub(crate) use server::percent_decode;

use crate::serving::{ServeError, Tls};

/// How a manager's admin server is set up beyond its address and certificate.
#[derive(Clone, Debug, Default)]
pub struct AdminOptions {
    /// The `--tls-*` and HTTP/2 flags.
    pub tls: TlsSettings,
    /// `--permit-port-sharing` / `--permit-address-sharing`.
    pub sharing: SocketSharing,
    /// Delegated authentication and authorization; `None` serves every caller (embedders
    /// behind their own gate, tests).
    pub auth: Option<DelegatedAuthConfig>,
    /// What `/configz` serves; embedders register their configuration here.
    pub configz: Configz,
    /// `/debug/pprof` (`--profiling`) and its heap profiler.
    pub profiling: Profiling,
}

impl AdminServer {
    /// HTTPS with `cert` and `options.tls`, and delegated auth when `options.auth` is set (the
    /// handshake then asks for client certificates if a client CA is known).
    pub async fn secure(
        self,
        cert: &ServingCert,
        options: &AdminOptions,
    ) -> Result<Self, AdminError> {
        let auth = match &options.auth {
            Some(cfg) => Some(Arc::new(DelegatedAuth::build(cfg).await?)),
            None => None,
        };
        let client_certs = auth.as_ref().is_some_and(|a| a.wants_client_certificates());
        if let Some(auth) = &auth {
            tokio::spawn(auth::keep_fresh(Arc::downgrade(auth)));
        }
        let certificates = cert.load()?.with_sni(&options.tls.sni)?;
        let tls = match client_certs {
            true => Tls::requesting_client_certificates(certificates, &options.tls)?,
            false => Tls::new(certificates, &options.tls)?,
        };
        let server = self.with_tls(tls);
        Ok(match auth {
            Some(auth) => server.with_auth(auth),
            None => server,
        })
    }
}

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
    /// Delegated authentication or authorization could not be set up.
    #[error(transparent)]
    Auth(#[from] AuthSetupError),
}

impl From<ServeError> for AdminError {
    fn from(error: ServeError) -> Self {
        match error {
            ServeError::Bind { addr, source } => AdminError::Bind { addr, source },
            ServeError::Serve(source) => AdminError::Serve(source),
        }
    }
}
