//! What one client may hold of a server: how many connections there may be at once, how long a
//! request's headers may take, and how long a connection may sit idle. Upstream's secure serving
//! has Go's `ReadHeaderTimeout` of 32 s and `IdleTimeout` of 90 s; without them a client sending
//! a byte a second, or an idle keep-alive, held its connection for good, and 300 of them used up
//! the process's file descriptors, so the controllers' own API client could not connect. The
//! connection cap is the other half: it leaves most descriptors to the rest of the process
//! whatever the clients do (the kernel's accept backlog holds the rest).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Go's `ReadHeaderTimeout` in upstream's secure serving.
const READ_HEADER_TIMEOUT: Duration = Duration::from_secs(32);
/// Go's `IdleTimeout` in upstream's secure serving.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// The most connections one server takes at once, whatever the descriptor limit.
const MAX_CONNECTIONS: usize = 1024;
/// The share of the process's open-file limit one server may hold (a quarter).
const FD_SHARE: usize = 4;

/// A server's per-connection limits; [`ConnectionLimits::default`] is upstream's timing
/// with a cap of a quarter of the open-file limit (at most 1,024).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// How long a client may take to send a request's headers (HTTP/1.1); also how long a
    /// keep-alive connection may wait for its next request.
    pub read_header_timeout: Duration,
    /// How long a connection with no request in flight may send and receive nothing.
    pub idle_timeout: Duration,
    /// Connections served (or in their TLS handshake) at once; more wait in the accept backlog.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        let max_connections = open_file_limit()
            .map_or(MAX_CONNECTIONS, |limit| limit / FD_SHARE)
            .clamp(1, MAX_CONNECTIONS);
        Self {
            read_header_timeout: READ_HEADER_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            max_connections,
        }
    }
}

/// The soft `RLIMIT_NOFILE`, read from `/proc/self/limits` (Linux); `None` elsewhere.
fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The TCP listener behind the cap: each accepted stream carries a permit of the cap.
pub(super) struct CappedListener {
    tcp: TcpListener,
    slots: Arc<Semaphore>,
}

impl CappedListener {
    pub(super) fn new(tcp: TcpListener, limits: &ConnectionLimits) -> Self {
        Self {
            tcp,
            slots: Arc::new(Semaphore::new(limits.max_connections.max(1))),
        }
    }

    /// Waits for a free slot, then for a connection. Accept errors (out of descriptors and the
    /// like) pass: they are logged and retried after a second, as axum's listener does.
    pub(super) async fn accept(&self) -> (Tracked<TcpStream>, std::net::SocketAddr) {
        loop {
            let Ok(permit) = self.slots.clone().acquire_owned().await else {
                // The semaphore is never closed; wait rather than spin if it ever were.
                std::future::pending::<()>().await;
                continue;
            };
            match self.tcp.accept().await {
                Ok((stream, peer)) => return (Tracked::new(stream, permit), peer),
                Err(error) => {
                    tracing::error!(%error, "cannot accept connections");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
}

/// When a connection last moved a byte, and how many of its requests are being answered.
#[derive(Debug)]
pub(super) struct Activity {
    base: Instant,
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    fn new() -> Self {
        Self {
            base: Instant::now(),
            last_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// When the connection, if nothing happens meanwhile, will have been idle for `idle`.
    pub(super) fn idle_deadline(&self, idle: Duration) -> Instant {
        self.base + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)) + idle
    }

    /// Whether no request is in flight and nothing moved for `idle`.
    pub(super) fn is_idle(&self, idle: Duration) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0 && self.idle_deadline(idle) <= Instant::now()
    }

    /// Counts a request as in flight until the guard is dropped.
    pub(super) fn request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }
}

/// One request being answered (see [`Activity::request`]).
pub(super) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

pin_project! {
    /// A stream that stamps its [`Activity`] on every read and write and holds its slot of the
    /// connection cap until it is dropped.
    pub(super) struct Tracked<S> {
        #[pin]
        inner: S,
        activity: Arc<Activity>,
        _slot: OwnedSemaphorePermit,
    }
}

impl<S> Tracked<S> {
    fn new(inner: S, slot: OwnedSemaphorePermit) -> Self {
        let activity = Arc::new(Activity::new());
        activity.touch();
        Self {
            inner,
            activity,
            _slot: slot,
        }
    }

    pub(super) fn activity(&self) -> Arc<Activity> {
        self.activity.clone()
    }
}

impl<S: AsyncRead> AsyncRead for Tracked<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let polled = this.inner.poll_read(cx, buf);
        if buf.filled().len() != before {
            this.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite> AsyncWrite for Tracked<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let polled = this.inner.poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let polled = this.inner.poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_is_a_quarter_of_the_open_file_limit() {
        let limits = ConnectionLimits::default();
        assert_eq!(limits.read_header_timeout, Duration::from_secs(32));
        assert_eq!(limits.idle_timeout, Duration::from_secs(90));
        match open_file_limit() {
            Some(n) => assert_eq!(limits.max_connections, (n / 4).clamp(1, 1024)),
            None => assert_eq!(limits.max_connections, 1024),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_without_requests_and_bytes() {
        let activity = Arc::new(Activity::new());
        activity.touch();
        let idle = Duration::from_secs(90);
        tokio::time::advance(Duration::from_secs(89)).await;
        assert!(!activity.is_idle(idle));
        let request = activity.request();
        tokio::time::advance(Duration::from_secs(200)).await;
        assert!(!activity.is_idle(idle), "a request is in flight");
        drop(request);
        assert!(!activity.is_idle(idle), "its answer was just sent");
        tokio::time::advance(idle).await;
        assert!(activity.is_idle(idle));
    }
}
