//! HTTPS for a server: [`Tls`] joins the [`Certificates`] to present (swappable while serving)
//! with what the `--tls-*` flags ask ([`TlsSettings`]) and, when an authenticator wants them, a
//! request for client certificates; [`TlsAcceptor`] runs the handshakes.
//!
//! - `certificates`: the live certificate store, its file reloads and in-memory rotation;
//!   `sni`: which certificate a server name gets; `handshake`: the rustls hooks.
//! - `serving_cert`: the flags' choice of certificate; `self_signed`: the generated fallback.
//! - `settings`: the `--tls-*` and HTTP/2 flags mapped onto rustls; `pem`: reading PEM;
//!   `error`: what goes wrong.

mod certificates;
mod error;
mod handshake;
mod pem;
mod self_signed;
mod serving_cert;
mod settings;
mod sni;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;

pub use certificates::{Certificates, RELOAD_EVERY};
pub use error::TlsError;
pub use self_signed::SelfSignedPair;
pub use serving_cert::ServingCert;
pub use settings::{SniCertKey, TlsSettings};

use super::connections::{CappedListener, Tracked};
use super::serve::{Acceptor, Http};
use handshake::{CurrentCert, RequestClientCert};

/// How long a client may take to finish the TLS handshake before it is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A server's TLS: its certificates, protocol versions, cipher suites, key-exchange groups, ALPN
/// (HTTP/2 first unless `--disable-http2-serving`) and whether clients are asked for a
/// certificate.
#[derive(Clone, Debug)]
pub struct Tls {
    config: Arc<ServerConfig>,
    certificates: Certificates,
    http: Http,
    reload_every: Duration,
}

impl Tls {
    /// TLS with `certificates` as `settings` ask; no client certificate is asked for.
    pub fn new(certificates: Certificates, settings: &TlsSettings) -> Result<Self, TlsError> {
        Self::build(certificates, settings, false)
    }

    /// As [`Self::new`], and each client is asked for a certificate, accepted whatever it is
    /// (only proof of its key is checked): each request then carries the chain as
    /// [`PeerCertificates`](super::PeerCertificates) for an authenticator to verify.
    pub fn requesting_client_certificates(
        certificates: Certificates,
        settings: &TlsSettings,
    ) -> Result<Self, TlsError> {
        Self::build(certificates, settings, true)
    }

    /// Re-reads certificate files every `every` instead of [`RELOAD_EVERY`].
    pub fn reload_every(mut self, every: Duration) -> Self {
        self.reload_every = every;
        self
    }

    fn build(
        certificates: Certificates,
        settings: &TlsSettings,
        request_client_certs: bool,
    ) -> Result<Self, TlsError> {
        let provider = Arc::new(settings.provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(settings.versions())?;
        let builder = match request_client_certs {
            true => builder.with_client_cert_verifier(Arc::new(RequestClientCert::new(provider))),
            false => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(Arc::new(CurrentCert(certificates.clone())));
        config.alpn_protocols = settings.alpn();
        Ok(Tls {
            config: Arc::new(config),
            certificates,
            http: Http {
                http2: settings.http2,
                max_streams: settings.http2_max_streams,
            },
            reload_every: RELOAD_EVERY,
        })
    }

    /// The rustls configuration.
    #[cfg(test)]
    pub(super) fn config(&self) -> &ServerConfig {
        &self.config
    }

    pub(super) fn http(&self) -> Http {
        self.http
    }

    pub(super) fn certificates(&self) -> (&Certificates, Duration) {
        (&self.certificates, self.reload_every)
    }
}

/// Accepts TCP connections and runs their TLS handshakes concurrently, handing the serve loop
/// only finished ones, so a slow or silent client cannot hold up the others. A connection in
/// its handshake holds its slot of the connection cap.
pub(super) struct TlsAcceptor {
    tcp: CappedListener,
    acceptor: tokio_rustls::TlsAcceptor,
    handshakes: JoinSet<Option<TlsStream<Tracked<TcpStream>>>>,
}

impl TlsAcceptor {
    pub(super) fn new(tcp: CappedListener, tls: &Tls) -> Self {
        Self {
            tcp,
            acceptor: tokio_rustls::TlsAcceptor::from(tls.config.clone()),
            handshakes: JoinSet::new(),
        }
    }
}

impl Acceptor for TlsAcceptor {
    type Io = TlsStream<Tracked<TcpStream>>;

    async fn accept(&mut self) -> Self::Io {
        loop {
            tokio::select! {
                (stream, peer) = self.tcp.accept() => {
                    let handshake = self.acceptor.accept(stream);
                    self.handshakes.spawn(async move {
                        handshaken(peer, tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await)
                    });
                }
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some(ready)) = done {
                        return ready;
                    }
                }
            }
        }
    }
}

/// The stream of a finished handshake; a failed or timed-out one is logged and dropped.
fn handshaken<S>(
    peer: SocketAddr,
    outcome: Result<io::Result<S>, tokio::time::error::Elapsed>,
) -> Option<S> {
    match outcome {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(error)) => {
            tracing::debug!(%peer, %error, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}

#[cfg(test)]
mod tests;
