//! A TLS listener on loopback under a CA of its own: the webhook servers the tests run behind
//! `clientConfig.url` (or a Service) with the CA as `caBundle`.

use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{ServerConfig, crypto::ring};

/// A bound listener, the acceptor for its certificate, and the CA that signed it.
pub struct Loopback {
    pub listener: TcpListener,
    pub addr: SocketAddr,
    pub acceptor: TlsAcceptor,
    /// The CA certificate, base64 PEM, as a `caBundle` holds it.
    pub ca_bundle: String,
}

/// Binds `127.0.0.1:0` and serves a certificate for `names`, signed by a fresh CA.
pub async fn loopback(names: &[&str]) -> Loopback {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let leaf = CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let private = tokio_rustls::rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], private)
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    Loopback {
        addr: listener.local_addr().unwrap(),
        listener,
        acceptor: TlsAcceptor::from(Arc::new(config)),
        ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca_pem),
    }
}
