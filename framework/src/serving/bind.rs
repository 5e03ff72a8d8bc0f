//! The listening socket: bound synchronously (so a caller asking for port 0 learns the real port
//! before serving), with `--permit-port-sharing` (`SO_REUSEPORT`) and `--permit-address-sharing`
//! (`SO_REUSEADDR`) as upstream's secure serving binds it.

use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

use super::ServeError;

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

/// Binds and listens on `addr`; non-blocking, ready for [`into_tokio`].
pub(super) fn bind(
    addr: SocketAddr,
    sharing: SocketSharing,
) -> Result<std::net::TcpListener, ServeError> {
    let failed = |source| ServeError::Bind { addr, source };
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
pub(super) fn into_tokio(
    listener: std::net::TcpListener,
) -> Result<tokio::net::TcpListener, ServeError> {
    tokio::net::TcpListener::from_std(listener).map_err(ServeError::Serve)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(unix)]
    fn port_sharing_lets_two_listeners_bind_one_port() {
        let shared = SocketSharing {
            reuse_port: true,
            reuse_address: false,
        };
        let first = bind("127.0.0.1:0".parse().unwrap(), shared).unwrap();
        let addr = first.local_addr().unwrap();
        assert!(bind(addr, shared).is_ok(), "SO_REUSEPORT on both");
        let err = bind(addr, SocketSharing::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("choose another bind address or port"),
            "{err}"
        );
    }
}
