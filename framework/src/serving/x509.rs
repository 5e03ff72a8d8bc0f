//! The little X.509 servers need beyond rustls: a CA bundle that verifies client certificate
//! chains (as Go's `x509.Certificate.Verify` with client-auth usage), for authenticators, and a
//! certificate's subject common name, organizations and DNS names, read from the DER, for them
//! and for SNI.

use std::sync::Arc;

use tokio_rustls::rustls::RootCertStore;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, UnixTime};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::server::danger::ClientCertVerifier;

/// Trust anchors for client certificates; cheap to clone.
#[derive(Clone)]
pub(crate) struct CaBundle {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CaBundle")
    }
}

impl CaBundle {
    /// Every CERTIFICATE block of `pem` becomes a trust anchor; `None` when there is none.
    pub(crate) fn from_pem(pem: &[u8]) -> Result<Option<Self>, String> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| e.to_string())?;
            roots.add(cert).map_err(|e| e.to_string())?;
        }
        if roots.is_empty() {
            return Ok(None);
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(ring::default_provider()),
        )
        .build()
        .map_err(|e| e.to_string())?;
        Ok(Some(CaBundle { verifier }))
    }

    /// Checks that `chain` (leaf first) leads to one of the anchors, is valid now, and allows
    /// client authentication.
    pub(crate) fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let (leaf, intermediates) = chain.split_first().ok_or("no client certificate")?;
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// What the authenticators and SNI read from a certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CertNames {
    /// The subject's (last) CN, as Go's `pkix.Name.CommonName`.
    pub common_name: String,
    /// The subject's O values, in order.
    pub organizations: Vec<String>,
    /// The subjectAltName DNS names.
    pub dns_names: Vec<String>,
}

/// One DER TLV at the start of `input`: (tag, contents, rest).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |l, b| (l << 8) | usize::from(*b));
        rest = &rest[n..];
        len
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

fn string_value(tag: u8, bytes: &[u8]) -> String {
    match tag {
        // BMPString: UTF-16BE.
        0x1e => {
            let units: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16_lossy(&units)
        }
        _ => String::from_utf8_lossy(bytes).into_owned(),
    }
}

const OID_CN: &[u8] = &[0x55, 0x04, 0x03];
const OID_O: &[u8] = &[0x55, 0x04, 0x0a];
const OID_SAN: &[u8] = &[0x55, 0x1d, 0x11];

/// Reads the subject and subjectAltName DNS names of a DER certificate; `None` if malformed.
pub(crate) fn cert_names(der: &[u8]) -> Option<CertNames> {
    let (_, cert, _) = tlv(der)?;
    let (_, mut tbs, _) = tlv(cert)?;
    if tlv(tbs)?.0 == 0xa0 {
        tbs = tlv(tbs)?.2; // [0] version
    }
    for _ in 0..4 {
        tbs = tlv(tbs)?.2; // serialNumber, signature, issuer, validity
    }
    let (_, mut name, rest) = tlv(tbs)?;
    let mut out = CertNames::default();
    while !name.is_empty() {
        let (_, mut set, more) = tlv(name)?;
        name = more;
        while !set.is_empty() {
            let (_, atv, more) = tlv(set)?;
            set = more;
            let (_, oid, value) = tlv(atv)?;
            let (tag, value, _) = tlv(value)?;
            match oid {
                OID_CN => out.common_name = string_value(tag, value),
                OID_O => out.organizations.push(string_value(tag, value)),
                _ => {}
            }
        }
    }
    // subjectPublicKeyInfo, then optional [1], [2], and [3] extensions.
    let mut rest = tlv(rest)?.2;
    while let Some((tag, contents, more)) = tlv(rest) {
        rest = more;
        if tag != 0xa3 {
            continue;
        }
        let (_, mut exts, _) = tlv(contents)?;
        while !exts.is_empty() {
            let (_, ext, more) = tlv(exts)?;
            exts = more;
            let (_, oid, mut body) = tlv(ext)?;
            if oid != OID_SAN {
                continue;
            }
            if tlv(body)?.0 == 0x01 {
                body = tlv(body)?.2; // critical
            }
            let (_, octets, _) = tlv(body)?;
            let (_, mut names, _) = tlv(octets)?;
            while !names.is_empty() {
                let (tag, value, more) = tlv(names)?;
                names = more;
                if tag == 0x82 {
                    out.dns_names
                        .push(String::from_utf8_lossy(value).into_owned());
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, DnType, KeyPair};

    use super::*;

    #[test]
    fn reads_cn_organizations_and_dns_names() {
        let mut params =
            CertificateParams::new(vec!["a.example.com".into(), "127.0.0.1".into()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, "alice");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        let cert = params.self_signed(&KeyPair::generate().unwrap()).unwrap();
        let names = cert_names(cert.der()).unwrap();
        assert_eq!(names.common_name, "alice");
        assert_eq!(names.organizations, vec!["system:masters"]);
        assert_eq!(names.dns_names, vec!["a.example.com"]);
        assert_eq!(cert_names(&cert.der()[..20]), None, "truncated");
    }

    #[test]
    fn an_empty_bundle_is_no_bundle() {
        assert!(CaBundle::from_pem(b"").unwrap().is_none());
        assert!(
            CaBundle::from_pem(b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
                .is_err()
        );
    }
}
