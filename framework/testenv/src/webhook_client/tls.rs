//! The TLS side of a webhook call: the roots a `caBundle` names (no bundle: no roots, since a test
//! machine's system roots never sign a loopback webhook) and rustls' refusals in Go's words
//! (`x509: certificate signed by unknown authority`).

use std::sync::Arc;

use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::{CertificateError, ClientConfig, Error, RootCertStore};

use super::error::CallError;

/// A client config trusting `ca_bundle` (PEM), speaking HTTP/1.1 as kube-apiserver's webhook
/// clients do; client-go's words when the bundle holds no certificate.
pub fn config(ca_bundle: &[u8]) -> Result<Arc<ClientConfig>, CallError> {
    let mut roots = RootCertStore::empty();
    if !ca_bundle.is_empty() {
        let load =
            |why: String| CallError::Setup(format!("unable to load root certificates: {why}"));
        let mut any = false;
        for cert in CertificateDer::pem_slice_iter(ca_bundle) {
            let cert = cert.map_err(|_| load("unable to parse bytes as PEM block".into()))?;
            roots
                .add(cert)
                .map_err(|e| load(format!("failed to parse certificate: {e}")))?;
            any = true;
        }
        if !any {
            return Err(load("unable to parse bytes as PEM block".into()));
        }
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| CallError::Setup(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A failed handshake as Go's `crypto/tls` and `crypto/x509` print it.
pub fn go_text(e: &std::io::Error, host: &str) -> String {
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<Error>()) else {
        return match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "EOF".into(),
            _ => super::error::os_text("read", e),
        };
    };
    match tls {
        // A bundle whose CA has the signer's name but not its key: Go appends which candidate it
        // tried; the verdict is the same.
        Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => "x509: certificate signed by unknown authority".into(),
        Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            presented, ..
        }) if presented.is_empty() => format!(
            "x509: cannot validate certificate for {host} because it doesn't contain any IP SANs"
        ),
        Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            presented, ..
        }) => {
            let names: Vec<&str> = presented
                .iter()
                .map(|p| p.trim_start_matches("DnsName(\"").trim_end_matches("\")"))
                .collect();
            format!(
                "x509: certificate is valid for {}, not {host}",
                names.join(", ")
            )
        }
        Error::InvalidCertificate(CertificateError::NotValidForName) => {
            format!("x509: certificate is not valid for {host}")
        }
        Error::InvalidCertificate(
            CertificateError::Expired | CertificateError::ExpiredContext { .. },
        ) => "x509: certificate has expired or is not yet valid".into(),
        Error::AlertReceived(alert) => {
            format!("remote error: tls: {}", format!("{alert:?}").to_lowercase())
        }
        other => format!("tls: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_without_a_certificate_is_refused_in_client_gos_words() {
        let e = config(b"not pem").unwrap_err();
        assert_eq!(
            e,
            CallError::Setup(
                "unable to load root certificates: unable to parse bytes as PEM block".into()
            )
        );
    }

    #[test]
    fn no_bundle_means_no_roots_yet_a_config() {
        assert!(config(b"").is_ok());
    }

    #[test]
    fn an_unknown_issuer_reads_as_go_reads_it() {
        let e = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        assert_eq!(
            go_text(&e, "127.0.0.1"),
            "x509: certificate signed by unknown authority"
        );
    }
}
