//! The serving layer every HTTP(S) server of the process stands on (the admin server today, the
//! webhook server next): binding a port ([`SocketSharing`], `SO_REUSEPORT`), TLS with
//! certificates swappable while serving ([`Tls`], [`Certificates`]: files re-read when they
//! change, an in-memory pair the process rotates, upstream's self-signed fallback through
//! [`ServingCert`]), HTTP/1.1 and HTTP/2 for any `tower::Service<http::Request<Incoming>>`,
//! connection limits and slow-client timeouts ([`ConnectionLimits`]), a graceful shutdown that
//! finishes in-flight requests, and each request's client certificates ([`PeerCertificates`])
//! for whatever authenticates it. What is served, and who may ask, is the caller's: the admin
//! server mounts its routes and delegated authentication and authorization on it.
//!
//! - `server`: [`Server`], binding and serving; `bind`: the socket; `serve`: the hyper loop.
//! - `connections`: the connection cap and the header and idle timeouts.
//! - `tls`: certificates, their reloading, SNI, the `--tls-*` flags, handshakes.
//! - `x509`: CA bundles and certificate names, for authenticators.
//!
//! A server that serves HTTPS from a mounted Secret's files and answers every request:
//!
//! ```no_run
//! use std::convert::Infallible;
//!
//! use bytes::Bytes;
//! use controller_manager::serving::{
//!     Certificates, PeerCertificates, Server, SocketSharing, Tls, TlsSettings,
//! };
//! use http_body_util::Full;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let certificates = Certificates::from_files("/etc/webhook/tls.crt", "/etc/webhook/tls.key")?;
//! let tls = Tls::new(certificates, &TlsSettings::default())?;
//! let server = Server::bind("0.0.0.0:10260".parse()?, SocketSharing::default())?.with_tls(tls);
//! let answer = tower::service_fn(|request: http::Request<hyper::body::Incoming>| async move {
//!     let presented = PeerCertificates::of(&request).chain().len();
//!     let body = format!("client certificates: {presented}\n");
//!     Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from(body))))
//! });
//! let shutdown = CancellationToken::new();
//! server.serve(answer, shutdown).await?;
//! # Ok(())
//! # }
//! ```

mod bind;
mod connections;
mod serve;
mod server;
mod tls;
pub(crate) mod x509;

pub use bind::SocketSharing;
pub use connections::ConnectionLimits;
pub use serve::PeerCertificates;
pub use server::Server;
pub use tls::{
    Certificates, RELOAD_EVERY, SelfSignedPair, ServingCert, SniCertKey, Tls, TlsError, TlsSettings,
};

/// Why a server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address is in use or not allowed; pick another.
    #[error("cannot listen on {addr}: {source} (choose another bind address or port)")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Accepting or serving connections failed.
    #[error("server failed: {0}")]
    Serve(#[source] std::io::Error),
}
