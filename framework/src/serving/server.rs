//! [`Server`]: one bound port serving one `tower::Service`, over HTTPS when given [`Tls`], until
//! its shutdown token fires.

use std::net::SocketAddr;

use http::{Request, Response};
use hyper::body::{Body, Incoming};
use tokio_util::sync::CancellationToken;

use super::ServeError;
use super::bind::{self, SocketSharing};
use super::connections::{CappedListener, ConnectionLimits};
use super::serve::{self, Http};
use super::tls::{Tls, TlsAcceptor, TlsSettings};

/// A bound port and how to serve it. Bound at construction, so a caller asking for port 0 learns
/// the real port ([`Self::local_addr`]) before serving.
pub struct Server {
    listener: std::net::TcpListener,
    local_addr: SocketAddr,
    tls: Option<Tls>,
    http: Http,
    limits: ConnectionLimits,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .field("tls", &self.tls.is_some())
            .field("http", &self.http)
            .field("limits", &self.limits)
            .finish()
    }
}

impl Server {
    /// Binds `addr` (with `sharing`) to serve plain HTTP/1.1 and HTTP/2 within the default
    /// [`ConnectionLimits`] until told otherwise.
    pub fn bind(addr: SocketAddr, sharing: SocketSharing) -> Result<Self, ServeError> {
        let listener = bind::bind(addr, sharing)?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
        let defaults = TlsSettings::default();
        Ok(Server {
            listener,
            local_addr,
            tls: None,
            http: Http {
                http2: defaults.http2,
                max_streams: defaults.http2_max_streams,
            },
            limits: ConnectionLimits::default(),
        })
    }

    /// The bound address (the real port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves HTTPS with `tls`, HTTP/2 as its settings say.
    pub fn with_tls(mut self, tls: Tls) -> Self {
        self.http = tls.http();
        self.tls = Some(tls);
        self
    }

    /// HTTP/2 on or off (`--disable-http2-serving`) and its concurrent-stream limit
    /// (`--http2-max-streams-per-connection`, 0 for Go's 250), as the settings say.
    pub fn with_http2(mut self, settings: &TlsSettings) -> Self {
        self.http = Http {
            http2: settings.http2,
            max_streams: settings.http2_max_streams,
        };
        self
    }

    /// Replaces the header, idle and connection-count limits.
    pub fn with_limits(mut self, limits: ConnectionLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether [`Self::with_tls`] was called.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Serves `service` until `shutdown` is cancelled, then lets in-flight requests finish and
    /// returns; certificate files are re-read meanwhile. Each request carries its connection's
    /// [`PeerCertificates`](super::PeerCertificates). Must run inside a tokio runtime.
    pub async fn serve<S, B>(
        self,
        service: S,
        shutdown: CancellationToken,
    ) -> Result<(), ServeError>
    where
        S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let tcp = CappedListener::new(bind::into_tokio(self.listener)?, &self.limits);
        match self.tls {
            Some(tls) => {
                let (certificates, every) = tls.certificates();
                let watch = certificates.clone().watch(every, shutdown.clone());
                let acceptor = TlsAcceptor::new(tcp, &tls);
                let serving = serve::serve(acceptor, service, self.http, self.limits, shutdown);
                tokio::join!(serving, watch);
            }
            None => serve::serve(tcp, service, self.http, self.limits, shutdown).await,
        }
        Ok(())
    }
}
