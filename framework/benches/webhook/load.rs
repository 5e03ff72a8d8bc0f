//! The load generator: keep-alive TLS connections to one server, POSTing the same review body,
//! either at a fixed rate (open loop: each request has its slot on a schedule and its latency
//! counts from that slot, so a stalled server is charged for the requests it delayed) or as fast
//! as the server answers (closed loop, one request in flight per HTTP/1.1 connection or per
//! HTTP/2 stream).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::time::Instant;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

/// The server under load and what is sent to it.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub ca: CertificateDer<'static>,
    pub body: Bytes,
}

/// HTTP/1.1 (as kube-apiserver's webhook client) or HTTP/2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Http1,
    Http2,
}

/// One measured run.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub proto: Proto,
    /// HTTP/1.1 connections, or HTTP/2 streams in flight on one connection.
    pub concurrency: usize,
    /// Requests per second; `None` for as fast as the server answers.
    pub rate: Option<f64>,
    pub duration: Duration,
}

/// What a run measured.
pub struct Outcome {
    /// Sorted.
    pub latencies: Vec<Duration>,
    pub failed: u64,
    pub elapsed: Duration,
    /// The negotiated TLS version and cipher suite, and ALPN.
    pub tls: String,
}

impl Outcome {
    pub fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() as f64 * p).ceil() as usize).clamp(1, self.latencies.len());
        self.latencies[i - 1]
    }

    pub fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }
}

/// A request sender on one connection.
#[derive(Clone)]
enum Sender {
    H1(Arc<tokio::sync::Mutex<http1::SendRequest<Full<Bytes>>>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

impl Sender {
    /// Sends one review; whether it was answered 200 with `allowed: true`.
    async fn review(&self, body: &Bytes) -> bool {
        matches!(self.answer(body).await, Some((200, answer)) if contains(&answer, b"\"allowed\":true"))
    }

    /// Sends one review; the status and body answered.
    async fn answer(&self, body: &Bytes) -> Option<(u16, Bytes)> {
        let request = http::Request::post("/validate?timeout=10s")
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, */*")
            .header(http::header::HOST, "localhost")
            .body(Full::new(body.clone()));
        let request = request.ok()?;
        let response = match self {
            Sender::H1(sender) => {
                let mut sender = sender.lock().await;
                sender.ready().await.ok()?;
                sender.send_request(request).await
            }
            Sender::H2(sender) => {
                let mut sender = sender.clone();
                sender.ready().await.ok()?;
                sender.send_request(request).await
            }
        };
        let response = response.ok()?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.ok()?.to_bytes();
        Some((status, body))
    }
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Opens a TLS connection speaking `proto`; the sender and a description of the session.
async fn connect(target: &Target, proto: Proto) -> anyhow::Result<(Sender, String)> {
    let mut roots = RootCertStore::empty();
    roots.add(target.ca.clone())?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = match proto {
        Proto::Http1 => vec![b"http/1.1".to_vec()],
        Proto::Http2 => vec![b"h2".to_vec()],
    };
    let tcp = tokio::net::TcpStream::connect(target.addr).await?;
    tcp.set_nodelay(true)?;
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let session = tls.get_ref().1;
    let described = format!(
        "{:?} {:?} {}",
        session.protocol_version(),
        session.negotiated_cipher_suite().map(|s| s.suite()),
        session
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default()
    );
    let io = TokioIo::new(tls);
    let sender = match proto {
        Proto::Http1 => {
            let (sender, connection) = http1::handshake(io).await?;
            tokio::spawn(connection);
            Sender::H1(Arc::new(tokio::sync::Mutex::new(sender)))
        }
        Proto::Http2 => {
            let (sender, connection) = http2::handshake(TokioExecutor::new(), io).await?;
            tokio::spawn(connection);
            Sender::H2(sender)
        }
    };
    Ok((sender, described))
}

/// One review over a fresh HTTP/1.1 connection: the status and body answered.
pub async fn once(target: &Target, body: Bytes) -> anyhow::Result<(u16, String)> {
    let (sender, _) = connect(target, Proto::Http1).await?;
    let (status, answer) = sender
        .answer(&body)
        .await
        .ok_or_else(|| anyhow::anyhow!("no answer from {}", target.addr))?;
    Ok((status, String::from_utf8_lossy(&answer).into_owned()))
}

/// Runs `run` against `target` after a one-second warm-up on the same connections.
pub async fn drive(target: &Target, run: Run) -> anyhow::Result<Outcome> {
    let mut senders = Vec::new();
    let mut tls = String::new();
    let connections = match run.proto {
        Proto::Http1 => run.concurrency,
        Proto::Http2 => 1,
    };
    for _ in 0..connections {
        let (sender, described) = connect(target, run.proto).await?;
        senders.push(sender);
        tls = described;
    }
    let warm = Run {
        rate: None,
        duration: Duration::from_secs(1),
        ..run
    };
    phase(target, &senders, warm).await;
    let (latencies, failed, elapsed) = phase(target, &senders, run).await;
    Ok(Outcome {
        latencies,
        failed,
        elapsed,
        tls,
    })
}

/// One phase of `run` over `senders`: sorted latencies, failures, elapsed time.
async fn phase(target: &Target, senders: &[Sender], run: Run) -> (Vec<Duration>, u64, Duration) {
    let start = Instant::now();
    let end = start + run.duration;
    let next = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..run.concurrency {
        let sender = senders[i % senders.len()].clone();
        let body = target.body.clone();
        let (next, failed) = (next.clone(), failed.clone());
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let scheduled = match run.rate {
                    Some(rate) => {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        let at = start + Duration::from_secs_f64(n as f64 / rate);
                        if at >= end {
                            break;
                        }
                        tokio::time::sleep_until(at).await;
                        at
                    }
                    None => {
                        let now = Instant::now();
                        if now >= end {
                            break;
                        }
                        now
                    }
                };
                if sender.review(&body).await {
                    latencies.push(scheduled.elapsed());
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
            latencies
        });
    }
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done.unwrap_or_default());
    }
    let elapsed = start.elapsed();
    all.sort_unstable();
    (all, failed.load(Ordering::Relaxed), elapsed)
}
