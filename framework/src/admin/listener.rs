//! Makes the admin server's listening socket, and [`TlsListener`], which wraps it in TLS.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;

use super::AdminError;

/// How long a client may take to finish the TLS handshake before it is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds `addr` synchronously so the caller learns the real port (for port 0) before serving.
pub(crate) fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, AdminError> {
    let listener =
        std::net::TcpListener::bind(addr).map_err(|source| AdminError::Bind { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| AdminError::Bind { addr, source })?;
    Ok(listener)
}

/// Hands the bound socket to tokio; must run inside a runtime.
pub(crate) fn into_tokio(
    listener: std::net::TcpListener,
) -> Result<tokio::net::TcpListener, AdminError> {
    tokio::net::TcpListener::from_std(listener).map_err(AdminError::Serve)
}

/// Accepts TCP connections and runs their TLS handshakes concurrently, handing axum only finished
/// ones, so a slow or silent client cannot hold up the others (a handshake inside `accept` would).
pub(crate) struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
}

impl TlsListener {
    pub(crate) fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> Self {
        Self {
            tcp,
            acceptor: TlsAcceptor::from(config),
            handshakes: JoinSet::new(),
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                accepted = self.tcp.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let handshake = self.acceptor.accept(stream);
                        self.handshakes.spawn(async move {
                            match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                                Ok(Ok(tls)) => Some((tls, peer)),
                                Ok(Err(error)) => {
                                    tracing::debug!(%peer, %error, "admin TLS handshake failed");
                                    None
                                }
                                Err(_) => {
                                    tracing::debug!(%peer, "admin TLS handshake timed out");
                                    None
                                }
                            }
                        });
                    }
                    Err(error) => {
                        // As axum's own listener: out of file descriptors and the like pass, so
                        // back off instead of spinning on the error.
                        tracing::error!(%error, "admin server cannot accept connections");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                },
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some(ready)) = done {
                        return ready;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
