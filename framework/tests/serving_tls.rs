//! The serving layer over real TLS on loopback, as a webhook server would use it: a certificate
//! file rewritten on disk (a rotated Secret) is presented from the next handshake on, a rewrite
//! that does not load keeps the previous certificate, an in-memory rotation applies at once, a
//! client certificate reaches the service, and shutdown lets an in-flight request finish.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use controller_manager::serving::{
    Certificates, PeerCertificates, SelfSignedPair, Server, SocketSharing, Tls, TlsSettings,
};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::sync::Notify;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_util::sync::CancellationToken;

/// Long enough for a loaded machine; every wait ends as soon as its condition holds.
const DEADLINE: Duration = Duration::from_secs(30);

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cm-serving-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn chain(pair: &SelfSignedPair) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A client trusting the CAs of `pairs`, presenting `client` if given.
fn client(pairs: &[&SelfSignedPair], client: Option<&SelfSignedPair>) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    for pair in pairs {
        roots.add(chain(pair)[1].clone()).unwrap();
    }
    let builder = ClientConfig::builder().with_root_certificates(roots);
    let config = match client {
        Some(pair) => {
            let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain(pair), key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    TlsConnector::from(Arc::new(config))
}

async fn handshake(connector: &TlsConnector, addr: SocketAddr) -> TlsStream<tokio::net::TcpStream> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    connector.connect(name, tcp).await.unwrap()
}

/// The leaf certificate the server presents to a new connection.
async fn presented(connector: &TlsConnector, addr: SocketAddr) -> CertificateDer<'static> {
    let tls = handshake(connector, addr).await;
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned()
}

/// GET `/` over a new connection; the status and body.
async fn get(connector: &TlsConnector, addr: SocketAddr) -> (u16, String) {
    let tls = handshake(connector, addr).await;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = http::Request::get("/")
        .header("host", "localhost")
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Answers every request with the number of client certificates its connection presented.
async fn count_certificates(
    request: http::Request<Incoming>,
) -> Result<http::Response<Full<Bytes>>, Infallible> {
    let count = PeerCertificates::of(&request).chain().len();
    Ok(http::Response::new(Full::new(Bytes::from(format!(
        "{count}"
    )))))
}

struct Running {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .unwrap()
            .unwrap();
    }
}

fn serve(tls: Tls) -> Running {
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), SocketSharing::default())
        .unwrap()
        .with_tls(tls);
    let addr = server.local_addr();
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let task = tokio::spawn(async move {
        let service = tower::service_fn(count_certificates);
        server.serve(service, stop).await.unwrap();
    });
    Running {
        addr,
        shutdown,
        task,
    }
}

#[tokio::test]
async fn a_rewritten_certificate_file_is_served_from_the_next_handshake_on() {
    let dir = scratch("files");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let (first, second) = (
        SelfSignedPair::generate().unwrap(),
        SelfSignedPair::generate().unwrap(),
    );
    first.write(&cert, &key).unwrap();
    let certificates = Certificates::from_files(&cert, &key).unwrap();
    let tls = Tls::new(certificates.clone(), &TlsSettings::default())
        .unwrap()
        .reload_every(Duration::from_millis(50));
    let server = serve(tls);
    let trusting = client(&[&first, &second], None);
    assert_eq!(presented(&trusting, server.addr).await, chain(&first)[0]);
    assert_eq!(get(&trusting, server.addr).await, (200, "0".to_string()));

    second.write(&cert, &key).unwrap();
    tokio::time::timeout(DEADLINE, async {
        while presented(&trusting, server.addr).await != chain(&second)[0] {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the rewritten files were never served");

    // A rewrite that does not load (a key from another pair) is refused, and the last good
    // certificate stays.
    std::fs::write(&key, &first.key_pem).unwrap();
    let refused = certificates.reload();
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("do not make a TLS configuration")),
        "{refused:?}"
    );
    assert_eq!(presented(&trusting, server.addr).await, chain(&second)[0]);
    assert_eq!(
        certificates.reload().ok(),
        Some(false),
        "refused once, not again and again"
    );
    server.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_in_memory_rotation_applies_to_the_next_handshake() {
    let (first, second) = (
        SelfSignedPair::generate().unwrap(),
        SelfSignedPair::generate().unwrap(),
    );
    let certificates =
        Certificates::from_pem(first.cert_pem.as_bytes(), first.key_pem.as_bytes()).unwrap();
    let server = serve(Tls::new(certificates.clone(), &TlsSettings::default()).unwrap());
    let trusting = client(&[&first, &second], None);
    assert_eq!(presented(&trusting, server.addr).await, chain(&first)[0]);

    let mismatched = certificates.replace_pem(second.cert_pem.as_bytes(), first.key_pem.as_bytes());
    assert!(
        mismatched.is_err(),
        "a key of another certificate is refused"
    );
    assert_eq!(presented(&trusting, server.addr).await, chain(&first)[0]);

    certificates
        .replace_pem(second.cert_pem.as_bytes(), second.key_pem.as_bytes())
        .unwrap();
    assert_eq!(presented(&trusting, server.addr).await, chain(&second)[0]);
    server.stop().await;
}

#[tokio::test]
async fn a_client_certificate_reaches_the_service_only_when_asked_for() {
    let (serving, client_pair) = (
        SelfSignedPair::generate().unwrap(),
        SelfSignedPair::generate().unwrap(),
    );
    let certificates =
        || Certificates::from_pem(serving.cert_pem.as_bytes(), serving.key_pem.as_bytes()).unwrap();
    let presenting = client(&[&serving], Some(&client_pair));

    let asking = serve(
        Tls::requesting_client_certificates(certificates(), &TlsSettings::default()).unwrap(),
    );
    assert_eq!(
        get(&presenting, asking.addr).await,
        (200, "2".to_string()),
        "leaf and CA"
    );
    let anonymous = client(&[&serving], None);
    assert_eq!(
        get(&anonymous, asking.addr).await,
        (200, "0".to_string()),
        "optional"
    );
    asking.stop().await;

    let not_asking = serve(Tls::new(certificates(), &TlsSettings::default()).unwrap());
    assert_eq!(
        get(&presenting, not_asking.addr).await,
        (200, "0".to_string())
    );
    not_asking.stop().await;
}

#[tokio::test]
async fn shutdown_lets_an_in_flight_request_finish() {
    let pair = SelfSignedPair::generate().unwrap();
    let certificates =
        Certificates::from_pem(pair.cert_pem.as_bytes(), pair.key_pem.as_bytes()).unwrap();
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), SocketSharing::default())
        .unwrap()
        .with_tls(Tls::new(certificates, &TlsSettings::default()).unwrap());
    let addr = server.local_addr();
    let (arrived, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let service = {
        let (arrived, release) = (arrived.clone(), release.clone());
        tower::service_fn(move |_request: http::Request<Incoming>| {
            let (arrived, release) = (arrived.clone(), release.clone());
            async move {
                arrived.notify_one();
                release.notified().await;
                Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from("finished"))))
            }
        })
    };
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(server.serve(service, shutdown.clone()));
    let trusting = client(&[&pair], None);
    let request = tokio::spawn(async move { get(&trusting, addr).await });
    arrived.notified().await;
    shutdown.cancel();
    // The server waits for the request rather than returning without it.
    tokio::task::yield_now().await;
    assert!(!serving.is_finished(), "returned with a request in flight");
    release.notify_one();
    let answer = tokio::time::timeout(DEADLINE, request)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer, (200, "finished".to_string()));
    tokio::time::timeout(DEADLINE, serving)
        .await
        .expect("returns once the request is answered")
        .unwrap()
        .unwrap();
    let refused = tokio::net::TcpStream::connect(addr).await;
    assert!(refused.is_err(), "the port is closed after shutdown");
}
