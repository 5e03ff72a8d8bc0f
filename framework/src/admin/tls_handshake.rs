//! What the admin server's TLS handshake decides beyond the basics: which certificate to present
//! by SNI (`--tls-sni-cert-key`, with Go's rules), and asking for a client certificate without
//! judging it (Go's `tls.RequestClientCert`), so the authenticators can verify it against the
//! CA that applies (`--client-ca-file` or the front proxy's) per request.

use std::collections::HashMap;
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

use super::x509::cert_names;

/// Offers client authentication, accepts any chain (checked later, per request) but still
/// verifies that the client holds the certificate's key.
#[derive(Debug)]
pub(crate) struct RequestClientCert {
    provider: Arc<CryptoProvider>,
}

impl RequestClientCert {
    pub(crate) fn new(provider: Arc<CryptoProvider>) -> Self {
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

/// Picks the certificate by server name as upstream's dynamic serving: exact names, then the
/// name with its first label replaced by `*`, else the default certificate. Explicit patterns
/// beat names read from a certificate; earlier flags beat later ones.
#[derive(Debug)]
pub(crate) struct SniResolver {
    default: Arc<CertifiedKey>,
    by_name: HashMap<String, Arc<CertifiedKey>>,
}

impl SniResolver {
    /// `pairs`: each certificate with its explicit patterns (empty: read from the certificate).
    pub(crate) fn new(
        default: Arc<CertifiedKey>,
        pairs: Vec<(Arc<CertifiedKey>, Vec<String>)>,
    ) -> Self {
        let mut by_name = HashMap::new();
        // Extracted names first, so explicit patterns overwrite them.
        for (key, names) in pairs.iter().rev() {
            if names.is_empty()
                && let Some(leaf) = key.cert.first()
                && let Some(found) = cert_names(leaf)
            {
                let cn = found.common_name.to_ascii_lowercase();
                let usable_cn = !cn.is_empty() && cn.parse::<std::net::IpAddr>().is_err();
                for name in usable_cn
                    .then_some(cn)
                    .into_iter()
                    .chain(found.dns_names.iter().map(|n| n.to_ascii_lowercase()))
                {
                    by_name.insert(name, key.clone());
                }
            }
        }
        for (key, names) in pairs.iter().rev() {
            for name in names {
                by_name.insert(name.clone(), key.clone());
            }
        }
        SniResolver { default, by_name }
    }

    fn lookup(&self, server_name: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = server_name.map(str::to_ascii_lowercase) else {
            return self.default.clone();
        };
        if let Some(key) = self.by_name.get(&name) {
            return key.clone();
        }
        if let Some((_, rest)) = name.split_once('.')
            && let Some(key) = self.by_name.get(&format!("*.{rest}"))
        {
            return key.clone();
        }
        self.default.clone()
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.lookup(client_hello.server_name()))
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, KeyPair};
    use tokio_rustls::rustls::crypto::ring;
    use tokio_rustls::rustls::pki_types::PrivateKeyDer;

    use super::*;

    fn key_for(names: &[&str]) -> Arc<CertifiedKey> {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.self_signed(&key).unwrap();
        let der = PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        Arc::new(
            CertifiedKey::from_der(vec![cert.der().clone()], der, &ring::default_provider())
                .unwrap(),
        )
    }

    #[test]
    fn exact_beats_wildcard_and_explicit_beats_extracted() {
        let default = key_for(&["localhost"]);
        let foo = key_for(&["foo.com"]);
        let wild = key_for(&["ignored.example"]);
        let explicit = key_for(&["bar.com"]);
        let r = SniResolver::new(
            default.clone(),
            vec![
                (foo.clone(), vec![]),
                (wild.clone(), vec!["*.foo.com".into()]),
                (explicit.clone(), vec!["foo.com".into()]),
            ],
        );
        let same = |a: &Arc<CertifiedKey>, b: &Arc<CertifiedKey>| Arc::ptr_eq(a, b);
        assert!(
            same(&r.lookup(Some("FOO.com")), &explicit),
            "explicit beats extracted"
        );
        assert!(same(&r.lookup(Some("a.foo.com")), &wild));
        assert!(
            same(&r.lookup(Some("a.b.foo.com")), &default),
            "one label only"
        );
        assert!(same(&r.lookup(None), &default));
        assert!(
            same(&r.lookup(Some("ignored.example")), &default),
            "explicit names replace extraction"
        );
    }
}
