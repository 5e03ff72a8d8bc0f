//! The HTTP/1.1 server: the accept loop, one task per connection, and the control channel that
//! restarts (drops every connection and watch, keeps the data) or stops it. Dropping the last
//! [`crate::TestEnv`] handle closes the control channel and so stops the server.

use std::convert::Infallible;
use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::auth;
use crate::http::router;
use crate::http::shared::Shared;

/// Commands from the [`crate::TestEnv`] handle to the accept loop.
pub enum Control {
    /// Drop every connection and watch, keep serving.
    Restart(oneshot::Sender<()>),
    /// Stop serving.
    Shutdown(oneshot::Sender<()>),
}

/// What a connection buffers, read or write (hyper's default is about 400 KiB): a watch whose
/// client stops reading holds no more than this besides the events it shares with every watch.
const MAX_BUF: usize = 64 << 10;

/// Serves one connection's requests, each tagged with the connection's client-certificate user.
async fn serve<IO>(io: IO, shared: Arc<Shared>, cert: Option<auth::ClientCertUser>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        let shared = shared.clone();
        if let Some(user) = &cert {
            req.extensions_mut().insert(user.clone());
        }
        async move { Ok::<_, Infallible>(router::handle(shared, req).await) }
    });
    if let Err(e) = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_BUF)
        .serve_connection(TokioIo::new(io), svc)
        .await
    {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// Serves until told to stop or until every handle is gone.
pub async fn run(listener: TcpListener, shared: Arc<Shared>, mut ctl: mpsc::Receiver<Control>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                conns.spawn(async move {
                    let Some(tls) = shared.tls.clone() else {
                        return serve(stream, shared, None).await;
                    };
                    match tls.acceptor.accept(stream).await {
                        Ok(stream) => {
                            let peer = stream.get_ref().1.peer_certificates();
                            let user = peer.and_then(|c| c.first()).and_then(|c| tls.user_of(c));
                            serve(stream, shared, user.map(auth::ClientCertUser)).await;
                        }
                        Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
                    }
                });
            }
            cmd = ctl.recv() => {
                conns.abort_all();
                shared.store.with(|s| s.close_watches());
                while conns.join_next().await.is_some() {}
                match cmd {
                    Some(Control::Restart(ack)) => {
                        let _ = ack.send(());
                    }
                    Some(Control::Shutdown(ack)) => {
                        let _ = ack.send(());
                        break;
                    }
                    None => break,
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}
