//! The certificates a self-managing process makes with rcgen: a CA, and serving certificates
//! for the webhook's DNS names (and IP addresses) signed by it. A CA is read back from its PEM
//! and key (the Secret keeps both), so any replica can issue under the CA another one made.
//! Certificates are told apart by [`fingerprint`], and a bundle of them is split by
//! [`bundle_fingerprints`].

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;

use super::error::CertsError;
use crate::serving::x509::cert_names;

/// A certificate and its private key, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8).
    pub key_pem: String,
}

/// The CA's key usages, as its issuer needs them.
fn ca_usages() -> Vec<KeyUsagePurpose> {
    vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ]
}

/// A new CA named `common_name`, valid for `days` from today.
pub(crate) fn new_ca(common_name: &str, days: u32) -> Result<Pair, CertsError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = ca_usages();
    valid_for(&mut params, days);
    let cert = params.self_signed(&key)?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A serving certificate for `names` (DNS names or IP addresses) signed by `ca`, valid for
/// `days` from today.
pub(crate) fn issue(ca: &Pair, names: &[String], days: u32) -> Result<Pair, CertsError> {
    let ca_key = KeyPair::from_pem(&ca.key_pem)?;
    let der = CertificateDer::from_pem_slice(ca.cert_pem.as_bytes())
        .map_err(|e| CertsError::Invalid(format!("ca.crt: {e}")))?;
    let subject = cert_names(&der)
        .ok_or_else(|| CertsError::Invalid("ca.crt: not a certificate".to_string()))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, subject.common_name);
    ca_params.key_usages = ca_usages();
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    let first = names.first().map(String::as_str).unwrap_or("webhook");
    params.distinguished_name.push(DnType::CommonName, first);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    valid_for(&mut params, days);
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// The SHA-256 of the first certificate's DER in `pem`, lowercase hex, as
/// `openssl x509 -fingerprint -sha256` prints it without the colons.
pub fn fingerprint(pem: &str) -> Result<String, CertsError> {
    let der = CertificateDer::from_pem_slice(pem.as_bytes())
        .map_err(|e| CertsError::Invalid(format!("not a PEM certificate: {e}")))?;
    Ok(hex(der.as_ref()))
}

/// The fingerprint of every certificate in `bundle`, in order.
pub(crate) fn bundle_fingerprints(bundle: &str) -> Result<Vec<String>, CertsError> {
    CertificateDer::pem_slice_iter(bundle.as_bytes())
        .map(|der| {
            der.map(|d| hex(d.as_ref()))
                .map_err(|e| CertsError::Invalid(format!("ca-bundle.crt: {e}")))
        })
        .collect()
}

fn hex(der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Valid from the start of today (UTC) for `days` days; rcgen takes whole dates.
fn valid_for(params: &mut CertificateParams, days: u32) {
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let until = today
        .checked_add(jiff::Span::new().days(i64::from(days)))
        .unwrap_or(today);
    let ymd = |d: jiff::civil::Date| {
        let month = u8::try_from(d.month()).unwrap_or(1);
        let day = u8::try_from(d.day()).unwrap_or(1);
        rcgen::date_time_ymd(i32::from(d.year()), month, day)
    };
    params.not_before = ymd(today);
    params.not_after = ymd(until);
}
