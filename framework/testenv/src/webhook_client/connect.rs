//! One webhook `POST`: a fresh TCP connection, the TLS handshake, an HTTP/1.1 request with a JSON
//! body and client-go's headers, and the answer read up to [`MAX_ANSWER_BYTES`], all within one
//! deadline whose expiry reads `Post "<url>": context deadline exceeded`, as Go's does.

use std::time::Duration;

use bytes::Bytes;
use http::header;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;

use super::error::{CallError, os_text};
use super::{Target, go_seconds, tls};

/// The most of an answer read: 3 MiB, kube-apiserver's bound on a request body (upstream reads a
/// webhook's answer without a bound, but within the call's deadline).
pub const MAX_ANSWER_BYTES: usize = 3 << 20;

/// The most of an answer's status line and headers read: Go's HTTP client's default
/// (`Transport.MaxResponseHeaderBytes` unset: 10 MiB); a longer head ends the call at once (so
/// does a head of more than 100 headers, hyper's bound, where Go has none).
const MAX_HEAD_BYTES: usize = 10 << 20;

/// What a webhook answered.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The URL called, with its `?timeout=`, for error messages.
    pub url: String,
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`, if sent.
    pub content_type: Option<String>,
    /// The body.
    pub body: Bytes,
}

/// POSTs `body` (JSON) to `target`, all of it within `timeout`. The deadline reads as Go's
/// does where it strikes: before the answer's head as the `Post` failing, while its body is read
/// as client-go's body-read error (a webhook that dribbles its body forever).
pub async fn post(target: &Target, body: Vec<u8>, timeout: Duration) -> Result<Answer, CallError> {
    let url = format!("{}?timeout={}", target.url, go_seconds(timeout));
    let deadline = tokio::time::Instant::now() + timeout;
    let response = match tokio::time::timeout_at(deadline, exchange(target, &url, body)).await {
        Ok(result) => result?,
        Err(_) => return Err(CallError::post(&url, "context deadline exceeded")),
    };
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let read = Limited::new(response.into_body(), MAX_ANSWER_BYTES).collect();
    let body = match tokio::time::timeout_at(deadline, read).await {
        Ok(Ok(body)) => body.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(body_error(format!(
                "the answer is larger than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        Ok(Err(e)) => return Err(body_error(e.to_string())),
        Err(_) => return Err(body_error("context deadline exceeded".into())),
    };
    Ok(Answer {
        url,
        status,
        content_type,
        body,
    })
}

/// client-go's error for an answer whose body could not be read.
fn body_error(why: String) -> CallError {
    CallError::Call(format!(
        "unexpected error when reading response body. Please retry. Original error: {why}"
    ))
}

/// Connects, sends the request and reads the answer's head.
async fn exchange(
    target: &Target,
    url: &str,
    body: Vec<u8>,
) -> Result<http::Response<hyper::body::Incoming>, CallError> {
    let dial = target
        .dial
        .as_deref()
        .map_err(|why| CallError::post(url, why))?;
    let tcp = connect(dial)
        .await
        .map_err(|why| CallError::post(url, why))?;
    let name = ServerName::try_from(target.server_name.clone())
        .map_err(|e| CallError::post(url, format!("tls: {e}")))?;
    let stream = TlsConnector::from(target.tls.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| CallError::post(url, tls::go_text(&e, &target.server_name)))?;
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| CallError::post(url, e))?;
    // The connection ends with this call (the sender is dropped on return).
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let path = if target.path.is_empty() {
        "/"
    } else {
        &target.path
    };
    let request = http::Request::post(format!("{path}?{}", query_of(url)))
        .header(header::HOST, host_of(&target.url))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, */*")
        .header(header::USER_AGENT, "kube-apiserver-admission")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| CallError::post(url, e))?;
    sender
        .send_request(request)
        .await
        .map_err(|e| CallError::post(url, hyper_text(&e)))
}

/// Dials `addr` (`host:port`) as Go's dialer reports failures (`dial tcp 127.0.0.1:1: connect:
/// connection refused`).
async fn connect(addr: &str) -> Result<TcpStream, String> {
    let addrs: Vec<std::net::SocketAddr> = match tokio::net::lookup_host(addr).await {
        Ok(a) => a.collect(),
        Err(_) => {
            let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
            return Err(format!("dial tcp: lookup {host}: no such host"));
        }
    };
    let mut last = format!("dial tcp {addr}: no address");
    for a in addrs {
        match TcpStream::connect(a).await {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("dial tcp {a}: {}", os_text("connect", &e)),
        }
    }
    Err(last)
}

/// A failed exchange as Go's HTTP client words it (a peer that closes without answering: `EOF`).
fn hyper_text(e: &hyper::Error) -> String {
    if e.is_incomplete_message() || e.is_canceled() {
        return "EOF".into();
    }
    if e.is_parse_too_large() {
        return format!(
            "net/http: server response headers exceeded {MAX_HEAD_BYTES} bytes; aborted"
        );
    }
    e.to_string()
}

fn query_of(url: &str) -> &str {
    url.split_once('?').map_or("", |(_, q)| q)
}

fn host_of(url: &str) -> &str {
    let rest = url.trim_start_matches("https://");
    rest.split('/').next().unwrap_or(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_connection_reads_as_go_reads_it() {
        let cc = super::super::ClientConfig {
            url: Some("https://127.0.0.1:1/down".into()),
            ..Default::default()
        };
        let store = crate::storage::store::Store::new(10, 10);
        let target = store.with(|s| cc.resolve(s)).unwrap();
        let e = post(&target, b"{}".to_vec(), Duration::from_secs(30))
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Post \"https://127.0.0.1:1/down?timeout=30s\": dial tcp 127.0.0.1:1: connect: connection refused"
        );
    }

    /// An HTTPS server on loopback whose certificate a fresh CA signed for 127.0.0.1, answering
    /// every request with `answer`; returns its address and the CA (PEM).
    async fn https_server(answer: &'static str) -> (std::net::SocketAddr, String) {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        use tokio_rustls::rustls::{ServerConfig, crypto::ring};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let private =
            tokio_rustls::rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let config =
            ServerConfig::builder_with_provider(std::sync::Arc::new(ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![leaf.der().clone()], private)
                .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    continue;
                };
                let service = hyper::service::service_fn(move |req: http::Request<_>| async move {
                    assert_eq!(req.uri().query(), Some("timeout=5s"));
                    let resp = http::Response::builder()
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(answer)));
                    Ok::<_, std::convert::Infallible>(resp.unwrap())
                });
                let io = TokioIo::new(tls);
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new().serve_connection(io, service),
                );
            }
        });
        (addr, ca_pem)
    }

    #[tokio::test]
    async fn a_call_verifies_the_bundle_and_reads_the_answer() {
        let (addr, ca) = https_server("{\"kind\":\"AdmissionReview\"}").await;
        let store = crate::storage::store::Store::new(10, 10);
        let good = super::super::ClientConfig {
            url: Some(format!("https://{addr}/allow")),
            service: None,
            ca_bundle: ca.into_bytes(),
        };
        let target = store.with(|s| good.resolve(s)).unwrap();
        let answer = post(&target, b"{}".to_vec(), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.url, format!("https://{addr}/allow?timeout=5s"));
        assert_eq!(&answer.body[..], b"{\"kind\":\"AdmissionReview\"}");

        let (_, other_ca) = https_server("{}").await;
        let wrong = super::super::ClientConfig {
            ca_bundle: other_ca.into_bytes(),
            ..good
        };
        let target = store.with(|s| wrong.resolve(s)).unwrap();
        let e = post(&target, b"{}".to_vec(), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "Post \"https://{addr}/allow?timeout=5s\": x509: certificate signed by unknown authority"
            )
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_costs_the_deadline() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Accepts and never speaks: the TLS handshake waits until the deadline.
        let _held = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            std::future::pending::<()>().await;
            drop(s);
        });
        let cc = super::super::ClientConfig {
            url: Some(format!("https://{addr}/slow")),
            ..Default::default()
        };
        let store = crate::storage::store::Store::new(10, 10);
        let target = store.with(|s| cc.resolve(s)).unwrap();
        let e = post(&target, b"{}".to_vec(), Duration::from_secs(1))
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("Post \"https://{addr}/slow?timeout=1s\": context deadline exceeded")
        );
    }
}
