//! Makes the admin server's listening socket; the single place where TLS (rustls with a self-signed
//! certificate, as upstream's secure serving) will wrap the listener.

use std::net::SocketAddr;

use super::AdminError;

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
