//! HTTPS for the embedded server (`Builder::https`): a CA made at start signs the serving
//! certificate (`127.0.0.1`, `localhost`) and the client certificates tests ask for. A client
//! certificate this CA signed authenticates as its common name with its organizations as groups,
//! as kube-apiserver's `--client-ca-file` does; since only this server holds the CA key, every
//! certificate that verifies is one it issued, so the user is looked up by the certificate.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

use super::tokens::UserInfo;

/// Why HTTPS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating a certificate failed.
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the generated material.
    #[error("configuring TLS: {0}")]
    Config(#[from] tokio_rustls::rustls::Error),
    /// The client verifier could not be built.
    #[error("configuring client certificate verification: {0}")]
    Verifier(#[from] tokio_rustls::rustls::server::VerifierBuilderError),
}

/// The server's CA, its TLS acceptor and the client certificates it issued.
pub struct Tls {
    /// Accepts TLS connections, asking for (not requiring) a client certificate.
    pub acceptor: TlsAcceptor,
    /// The CA certificate, PEM (for kubeconfigs and `client-ca-file`).
    pub ca_pem: String,
    /// The CA certificate, DER (for `kube::Config::root_cert`).
    pub ca_der: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
    clients: Mutex<HashMap<Vec<u8>, UserInfo>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// Makes the CA and the serving certificate.
    pub fn new() -> Result<Tls, TlsError> {
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name
            .push(DnType::CommonName, "kube-testenv-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate()?;
        let mut leaf =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
        leaf.distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let leaf_cert = leaf.signed_by(&key, &issuer)?;

        let mut roots = RootCertStore::empty();
        roots.add(ca_cert.der().clone())?;
        let provider = Arc::new(ring::default_provider());
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .build()?;
        let chain = vec![leaf_cert.der().clone(), ca_cert.der().clone()];
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, private)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().to_vec(),
            issuer,
            clients: Mutex::new(HashMap::new()),
        })
    }

    /// A client certificate and key (PEM) for `user` in `groups` (CN and O, as upstream reads
    /// them), signed by this server's CA.
    pub fn client_certificate(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<(String, String), TlsError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, user);
        for g in groups {
            params.distinguished_name.push(DnType::OrganizationName, *g);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer)?;
        self.clients.lock().insert(
            cert.der().to_vec(),
            UserInfo::authenticated(user, "", groups),
        );
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// The user of a verified client certificate.
    pub fn user_of(&self, cert: &CertificateDer<'_>) -> Option<UserInfo> {
        self.clients.lock().get(cert.as_ref()).cloned()
    }
}

/// The user a connection's client certificate authenticated, carried in request extensions.
#[derive(Debug, Clone)]
pub struct ClientCertUser(pub UserInfo);

/// Standard base64 (with padding), for the `*-data` fields of kubeconfigs.
pub fn base64(data: &[u8]) -> String {
    use ::base64::Engine;
    ::base64::engine::general_purpose::STANDARD.encode(data)
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_matches_the_standard_encoding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
