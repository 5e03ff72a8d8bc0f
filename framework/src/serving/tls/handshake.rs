//! What a TLS handshake decides beyond the basics: which certificate to present (the one
//! [`Certificates`] holds now for the asked server name), and asking for a client certificate
//! without judging it (Go's `tls.RequestClientCert`), so authenticators can verify it against
//! the CA that applies to them (`--client-ca-file` or the front proxy's) per request.

use std::sync::Arc;

use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::crypto::{
    CryptoProvider, verify_tls12_signature, verify_tls13_signature,
};
use tokio_rustls::rustls::pki_types::{CertificateDer, UnixTime};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};

use super::Certificates;

/// Offers client authentication, accepts any chain (checked later, per request) but still
/// verifies that the client holds the certificate's key.
#[derive(Debug)]
pub(super) struct RequestClientCert {
    provider: Arc<CryptoProvider>,
}

impl RequestClientCert {
    pub(super) fn new(provider: Arc<CryptoProvider>) -> Self {
        RequestClientCert { provider }
    }
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Hands each handshake the certificate [`Certificates`] holds now for its server name, so a
/// reload or an in-memory rotation applies to the next handshake.
#[derive(Debug)]
pub(super) struct CurrentCert(pub(super) Certificates);

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.current().lookup(client_hello.server_name()))
    }
}
