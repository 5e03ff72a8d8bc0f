//! Makes the admin server's listening socket (with `--permit-port-sharing` /
//! `--permit-address-sharing`), [`TlsListener`], which wraps it in TLS, and the serve loop:
//! HTTP/1.1 and HTTP/2 by hyper, each request carrying its connection's client certificates,
//! each connection within the [`ConnectionLimits`] (`connections`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::AdminError;
use super::auth::PeerCertificates;
use super::connections::{Activity, CappedListener, ConnectionLimits, Tracked};

/// How long a client may take to finish the TLS handshake before it is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Pending connections the kernel queues (Go uses the system's somaxconn; 1024 is its usual value).
const BACKLOG: i32 = 1024;

/// `--permit-port-sharing` and `--permit-address-sharing`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketSharing {
    /// `SO_REUSEPORT`: several processes may listen on the same address and port.
    pub reuse_port: bool,
    /// `SO_REUSEADDR`. On Unix it is always set, as Go's and Rust's listeners do, so this only
    /// matters elsewhere.
    pub reuse_address: bool,
}

/// Binds `addr` synchronously so the caller learns the real port (for port 0) before serving.
pub(crate) fn bind(
    addr: SocketAddr,
    sharing: SocketSharing,
) -> Result<std::net::TcpListener, AdminError> {
    let failed = |source| AdminError::Bind { addr, source };
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(failed)?;
    if cfg!(unix) || sharing.reuse_address {
        socket.set_reuse_address(true).map_err(failed)?;
    }
    #[cfg(unix)]
    if sharing.reuse_port {
        socket.set_reuse_port(true).map_err(failed)?;
    }
    socket.bind(&addr.into()).map_err(failed)?;
    socket.listen(BACKLOG).map_err(failed)?;
    socket.set_nonblocking(true).map_err(failed)?;
    Ok(socket.into())
}

/// Hands the bound socket to tokio; must run inside a runtime.
pub(crate) fn into_tokio(
    listener: std::net::TcpListener,
) -> Result<tokio::net::TcpListener, AdminError> {
    tokio::net::TcpListener::from_std(listener).map_err(AdminError::Serve)
}

/// HTTP settings of the serve loop.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Http {
    /// Speak HTTP/2 as well as HTTP/1.1.
    pub http2: bool,
    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub max_streams: u32,
    /// Header, idle and connection-count limits.
    pub limits: ConnectionLimits,
}

/// What the serve loop needs of an accepted connection: the client certificates it presented
/// (none over plain HTTP) and its [`Activity`].
pub(crate) trait AdminStream {
    fn peer_certs(&self) -> PeerCertificates;
    fn activity(&self) -> Arc<Activity>;
}

impl AdminStream for Tracked<TcpStream> {
    fn peer_certs(&self) -> PeerCertificates {
        PeerCertificates::default()
    }

    fn activity(&self) -> Arc<Activity> {
        Tracked::activity(self)
    }
}

impl AdminStream for TlsStream<Tracked<TcpStream>> {
    fn peer_certs(&self) -> PeerCertificates {
        let certs = self.get_ref().1.peer_certificates().unwrap_or_default();
        PeerCertificates(Arc::new(
            certs.iter().map(|c| c.clone().into_owned()).collect(),
        ))
    }

    fn activity(&self) -> Arc<Activity> {
        self.get_ref().0.activity()
    }
}

/// Serves `router` on every accepted connection until `shutdown`, then lets in-flight requests
/// finish (each connection shuts down gracefully) and returns. A connection with no request in
/// flight that moves no byte for the idle timeout is shut down the same way.
pub(crate) async fn serve<L>(
    mut listener: L,
    router: Router,
    http: Http,
    shutdown: CancellationToken,
) where
    L: axum::serve::Listener,
    L::Io: AdminStream,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(http.limits.read_header_timeout);
    if http.http2 {
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(http.max_streams);
    } else {
        builder = builder.http1_only();
    }
    let idle = http.limits.idle_timeout;
    let mut connections = JoinSet::new();
    loop {
        let io = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            (io, _peer) = listener.accept() => io,
        };
        let certs = io.peer_certs();
        let activity = io.activity();
        let counted = activity.clone();
        let service = router
            .clone()
            .map_request(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(certs.clone());
                req
            })
            .map_future(move |answer| {
                let in_flight = counted.request();
                async move {
                    let response = answer.await;
                    drop(in_flight);
                    response
                }
            });
        let builder = builder.clone();
        let stop = shutdown.clone();
        connections.spawn(async move {
            let connection =
                builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
            tokio::pin!(connection);
            let result = loop {
                tokio::select! {
                    result = connection.as_mut() => break result,
                    _ = stop.cancelled() => {
                        connection.as_mut().graceful_shutdown();
                        break connection.await;
                    }
                    _ = tokio::time::sleep_until(activity.idle_deadline(idle)) => {
                        if activity.is_idle(idle) {
                            tracing::debug!(?idle, "closing an idle admin connection");
                            connection.as_mut().graceful_shutdown();
                            break connection.await;
                        }
                    }
                }
            };
            if let Err(error) = result {
                tracing::debug!(%error, "admin connection ended with an error");
            }
        });
    }
    while connections.join_next().await.is_some() {}
}

/// Accepts TCP connections and runs their TLS handshakes concurrently, handing the serve loop
/// only finished ones, so a slow or silent client cannot hold up the others. A connection in
/// its handshake holds its slot of the connection cap.
pub(crate) struct TlsListener {
    tcp: CappedListener,
    acceptor: TlsAcceptor,
    handshakes: JoinSet<Option<(TlsStream<Tracked<TcpStream>>, SocketAddr)>>,
}

impl TlsListener {
    pub(crate) fn new(tcp: CappedListener, config: Arc<ServerConfig>) -> Self {
        Self {
            tcp,
            acceptor: TlsAcceptor::from(config),
            handshakes: JoinSet::new(),
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<Tracked<TcpStream>>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                (stream, peer) = self.tcp.accept() => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(unix)]
    fn port_sharing_lets_two_listeners_bind_one_port() {
        let first = bind(
            "127.0.0.1:0".parse().unwrap(),
            SocketSharing {
                reuse_port: true,
                reuse_address: false,
            },
        )
        .unwrap();
        let addr = first.local_addr().unwrap();
        let shared = SocketSharing {
            reuse_port: true,
            reuse_address: false,
        };
        assert!(bind(addr, shared).is_ok(), "SO_REUSEPORT on both");
        let err = bind(addr, SocketSharing::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("choose another bind address or port"),
            "{err}"
        );
    }
}
