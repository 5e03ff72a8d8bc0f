//! HTTPS for the admin server, as upstream's secure serving: the certificate chain and key from
//! `--tls-cert-file` / `--tls-private-key-file`, or else a self-signed pair made at start.
//!
//! The self-signed pair follows client-go's `GenerateSelfSignedCertKeyWithFixtures`, which
//! upstream's `MaybeDefaultWithSelfSignedCerts("localhost", …, [127.0.0.1])` calls: a throwaway
//! CA (`<host>-ca@<unix time>`) signs a serving certificate (`<host>@<unix time>`, server auth,
//! SANs `localhost` and `127.0.0.1`), valid for one year; the certificate file holds the serving
//! certificate followed by the CA. Without `--cert-dir` the pair lives in memory only. With it,
//! `<cert-dir>/<pair>.crt` and `<pair>.key` are reused when both exist and are readable, else
//! generated and written there (the key with mode 0600), so clients can pin the CA across restarts.
//!
//! [`ServingCert::server_config_with`] applies the `--tls-*` flags ([`TlsSettings`]), SNI
//! certificates and the client-certificate request delegated authentication needs.
//!
//! Differences from upstream: keys are ECDSA P-256 rather than RSA-2048 (what rcgen makes with the
//! `ring` backend our TLS stack already uses), and the certificate files are read once at start
//! (upstream's dynamic serving certificate reloads them when they change).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::sign::CertifiedKey;

use super::tls_flags::TlsSettings;
use super::tls_handshake::{RequestClientCert, SniResolver};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The host the self-signed certificate is made for, and its extra IP, as upstream.
const SELF_SIGNED_HOST: &str = "localhost";
const SELF_SIGNED_IP: &str = "127.0.0.1";

/// Why the admin server's TLS material could not be loaded or made; each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file could not be read or holds no usable PEM block.
    #[error(
        "cannot use {path}: {message} (check --tls-cert-file/--tls-private-key-file or --cert-dir)"
    )]
    File {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        message: String,
    },
    /// A generated pair could not be written to `--cert-dir`.
    #[error("cannot write the generated certificate to {path}: {source} (check --cert-dir)")]
    Write {
        /// The file being written.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Generating the self-signed certificate failed.
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls rejected the certificate chain or key (e.g. a key that does not match).
    #[error("the serving certificate and key do not make a TLS configuration: {0}")]
    Config(#[from] tokio_rustls::rustls::Error),
}

/// Where the admin server's certificate comes from, chosen from the serving flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServingCert {
    /// `--tls-cert-file` (PEM chain, serving certificate first) and `--tls-private-key-file`.
    Files {
        /// The certificate chain file.
        cert: PathBuf,
        /// The private key file.
        key: PathBuf,
    },
    /// No files given: a self-signed pair, kept in memory, or reused from / written to
    /// `<cert_dir>/<pair_name>.crt` and `.key`.
    SelfSigned {
        /// `--cert-dir`, if given.
        cert_dir: Option<PathBuf>,
        /// The file stem, upstream's `PairName` (the component name).
        pair_name: String,
    },
}

impl ServingCert {
    /// Upstream's precedence: explicit files win and `--cert-dir` is then ignored.
    pub fn from_flags(
        tls_cert_file: Option<&Path>,
        tls_private_key_file: Option<&Path>,
        cert_dir: Option<&Path>,
        pair_name: &str,
    ) -> Self {
        match (tls_cert_file, tls_private_key_file) {
            (Some(cert), Some(key)) => ServingCert::Files {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
            },
            _ => ServingCert::SelfSigned {
                cert_dir: cert_dir.map(Path::to_path_buf),
                pair_name: pair_name.to_string(),
            },
        }
    }

    /// Loads (or makes) the certificate and key and builds the server's TLS configuration with
    /// upstream's defaults (TLS 1.2 and 1.3, HTTP/2 and HTTP/1.1 by ALPN, no client certificates).
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        self.server_config_with(&TlsSettings::default(), false)
    }

    /// As [`Self::server_config`], with the `--tls-*` flags' `settings`, the `--tls-sni-cert-key`
    /// certificates, and, when `request_client_certs`, a request for a client certificate that
    /// the delegated authenticators verify per request.
    pub fn server_config_with(
        &self,
        settings: &TlsSettings,
        request_client_certs: bool,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let (chain, key) = match self {
            ServingCert::Files { cert, key } => (read_chain(cert)?, read_key(key)?),
            ServingCert::SelfSigned {
                cert_dir: None,
                pair_name: _,
            } => {
                let pair = SelfSignedPair::generate()?;
                (parse_chain(&pair.cert_pem)?, parse_key(&pair.key_pem)?)
            }
            ServingCert::SelfSigned {
                cert_dir: Some(dir),
                pair_name,
            } => {
                let cert = dir.join(format!("{pair_name}.crt"));
                let key = dir.join(format!("{pair_name}.key"));
                if !(readable(&cert) && readable(&key)) {
                    SelfSignedPair::generate()?.write(&cert, &key)?;
                    tracing::info!(cert = %cert.display(), "generated a self-signed serving certificate");
                }
                (read_chain(&cert)?, read_key(&key)?)
            }
        };
        let provider = Arc::new(settings.provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(settings.versions())?;
        let builder = match request_client_certs {
            true => builder
                .with_client_cert_verifier(Arc::new(RequestClientCert::new(provider.clone()))),
            false => builder.with_no_client_auth(),
        };
        let mut config = if settings.sni.is_empty() {
            builder.with_single_cert(chain, key)?
        } else {
            let default = Arc::new(CertifiedKey::from_der(chain, key, &provider)?);
            let mut pairs = Vec::new();
            for sni in &settings.sni {
                let chain = read_chain(&sni.cert)?;
                let key = read_key(&sni.key)?;
                let certified = CertifiedKey::from_der(chain, key, &provider)?;
                pairs.push((Arc::new(certified), sni.names.clone()));
            }
            builder.with_cert_resolver(Arc::new(SniResolver::new(default, pairs)))
        };
        config.alpn_protocols = settings.alpn();
        Ok(Arc::new(config))
    }
}

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

fn readable(path: &Path) -> bool {
    std::fs::File::open(path).is_ok()
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let failed = |message: String| TlsError::File {
        path: path.to_path_buf(),
        message,
    };
    let pem = crate::files::read_bounded(path).map_err(|e| failed(e.to_string()))?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(e.to_string()))?;
    if chain.is_empty() {
        return Err(failed("no PEM CERTIFICATE block".to_string()));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let failed = |message: String| TlsError::File {
        path: path.to_path_buf(),
        message,
    };
    let pem = crate::files::read_bounded(path).map_err(|e| failed(e.to_string()))?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| failed(e.to_string()))
}

fn parse_chain(pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::File {
            path: PathBuf::from("<generated>"),
            message: e.to_string(),
        })
}

fn parse_key(pem: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| TlsError::File {
        path: PathBuf::from("<generated>"),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests;
