//! The serve loop: HTTP/1.1 and HTTP/2 by hyper on every accepted connection, each request
//! carrying its connection's client certificates ([`PeerCertificates`]), each connection within
//! the [`ConnectionLimits`], and a graceful shutdown that lets in-flight requests finish.

use std::sync::Arc;

use http::{Request, Response};
use hyper::body::{Body, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::connections::{Activity, CappedListener, ConnectionLimits, Tracked};

/// The client certificate chain (leaf first) the request's TLS connection presented; empty over
/// plain HTTP, when the client sent none, or when the handshake did not ask for one. Every
/// request the serving layer hands a service carries it as an extension; it is not verified
/// (authenticators verify it against the CA that applies to them).
#[derive(Clone, Debug, Default)]
pub struct PeerCertificates(Arc<Vec<CertificateDer<'static>>>);

impl PeerCertificates {
    /// The chain, leaf first.
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.0
    }

    /// The chain the request's connection presented, empty if the request has none.
    pub fn of<B>(request: &Request<B>) -> Self {
        request
            .extensions()
            .get::<Self>()
            .cloned()
            .unwrap_or_default()
    }
}

/// HTTP settings of the serve loop.
#[derive(Clone, Copy, Debug)]
pub(super) struct Http {
    /// Speak HTTP/2 as well as HTTP/1.1.
    pub http2: bool,
    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub max_streams: u32,
}

/// Where the serve loop gets its connections: plain TCP or finished TLS handshakes.
pub(super) trait Acceptor: Send {
    type Io: Connection;
    fn accept(&mut self) -> impl Future<Output = Self::Io> + Send;
}

/// What the serve loop needs of an accepted connection beyond its bytes.
pub(super) trait Connection: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// The client certificates it presented (none over plain HTTP).
    fn peer_certs(&self) -> PeerCertificates;
    /// When it last moved a byte, and its requests in flight.
    fn activity(&self) -> Arc<Activity>;
}

impl Acceptor for CappedListener {
    type Io = Tracked<TcpStream>;

    async fn accept(&mut self) -> Self::Io {
        CappedListener::accept(self).await.0
    }
}

impl Connection for Tracked<TcpStream> {
    fn peer_certs(&self) -> PeerCertificates {
        PeerCertificates::default()
    }

    fn activity(&self) -> Arc<Activity> {
        Tracked::activity(self)
    }
}

impl Connection for TlsStream<Tracked<TcpStream>> {
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

/// Serves `service` on every accepted connection until `shutdown`, then lets in-flight requests
/// finish (each connection shuts down gracefully) and returns. A connection with no request in
/// flight that moves no byte for the idle timeout is shut down the same way.
pub(super) async fn serve<A, S, B>(
    mut acceptor: A,
    service: S,
    http: Http,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) where
    A: Acceptor,
    S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.read_header_timeout);
    if http.http2 {
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(http.max_streams);
    } else {
        builder = builder.http1_only();
    }
    let idle = limits.idle_timeout;
    let mut connections = JoinSet::new();
    loop {
        let io = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            io = acceptor.accept() => io,
        };
        let certs = io.peer_certs();
        let activity = io.activity();
        let counted = activity.clone();
        let service = service
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
                            tracing::debug!(?idle, "closing an idle connection");
                            connection.as_mut().graceful_shutdown();
                            break connection.await;
                        }
                    }
                }
            };
            if let Err(error) = result {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    while connections.join_next().await.is_some() {}
}
