//! The self-signed fallback of upstream's secure serving, following client-go's
//! `GenerateSelfSignedCertKeyWithFixtures`, which `MaybeDefaultWithSelfSignedCerts("localhost", …,
//! [127.0.0.1])` calls: a throwaway CA (`<host>-ca@<unix time>`) signs a serving certificate
//! (`<host>@<unix time>`, server auth, SANs `localhost` and `127.0.0.1`), valid for one year; the
//! certificate PEM holds the serving certificate followed by the CA.
//!
//! Difference from upstream: keys are ECDSA P-256 rather than RSA-2048 (what rcgen makes with the
//! `ring` backend our TLS stack already uses).

use std::io;
use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::error::TlsError;

/// The host the self-signed certificate is made for, and its extra IP, as upstream.
const SELF_SIGNED_HOST: &str = "localhost";
const SELF_SIGNED_IP: &str = "127.0.0.1";

/// A generated serving certificate (followed by its CA) and key, both PEM.
#[derive(Clone, Debug)]
pub struct SelfSignedPair {
    /// Serving certificate, then the CA that signed it.
    pub cert_pem: String,
    /// The serving certificate's private key (PKCS#8).
    pub key_pem: String,
}

impl SelfSignedPair {
    /// Makes a CA and a serving certificate for `localhost` / `127.0.0.1`, valid for a year.
    pub fn generate() -> Result<Self, TlsError> {
        let now = jiff::Timestamp::now();
        let stamp = now.as_second();

        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name
            .push(DnType::CommonName, format!("{SELF_SIGNED_HOST}-ca@{stamp}"));
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        set_validity(&mut ca, now);
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate()?;
        let mut leaf = CertificateParams::new(vec![
            SELF_SIGNED_HOST.to_string(),
            SELF_SIGNED_IP.to_string(),
        ])?;
        leaf.distinguished_name
            .push(DnType::CommonName, format!("{SELF_SIGNED_HOST}@{stamp}"));
        leaf.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        set_validity(&mut leaf, now);
        let leaf_cert = leaf.signed_by(&key, &issuer)?;

        Ok(SelfSignedPair {
            cert_pem: format!("{}{}", leaf_cert.pem(), ca_cert.pem()),
            key_pem: key.serialize_pem(),
        })
    }

    /// Writes the pair for reuse by later starts; the key is readable by the owner only.
    pub fn write(&self, cert: &Path, key: &Path) -> Result<(), TlsError> {
        let write = |path: &Path, contents: &str, mode: u32| -> Result<(), TlsError> {
            let failed = |source| TlsError::Write {
                path: path.to_path_buf(),
                source,
            };
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(failed)?;
            }
            write_with_mode(path, contents.as_bytes(), mode).map_err(failed)
        };
        write(cert, &self.cert_pem, 0o644)?;
        write(key, &self.key_pem, 0o600)
    }
}

/// Valid from the start of the current day (UTC) for a year; rcgen takes whole dates.
fn set_validity(params: &mut CertificateParams, now: jiff::Timestamp) {
    let today = now.to_zoned(jiff::tz::TimeZone::UTC).date();
    let next_year = today
        .checked_add(jiff::Span::new().years(1))
        .unwrap_or(today);
    let ymd = |d: jiff::civil::Date| {
        let month = u8::try_from(d.month()).unwrap_or(1);
        let day = u8::try_from(d.day()).unwrap_or(1);
        rcgen::date_time_ymd(i32::from(d.year()), month, day)
    };
    params.not_before = ymd(today);
    params.not_after = ymd(next_year);
}

#[cfg(unix)]
fn write_with_mode(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)?;
    file.write_all(contents)
}

#[cfg(not(unix))]
fn write_with_mode(path: &Path, contents: &[u8], _mode: u32) -> io::Result<()> {
    std::fs::write(path, contents)
}
