//! [`ServingCert`]: which certificate the serving flags choose, as upstream's secure serving: the
//! chain and key of `--tls-cert-file` / `--tls-private-key-file`, or else a self-signed pair made
//! at start ([`SelfSignedPair`]). Without `--cert-dir` the pair lives in memory only. With it,
//! `<cert-dir>/<pair>.crt` and `<pair>.key` are reused when both exist and are readable, else
//! generated and written there (the key with mode 0600), so clients can pin the CA across
//! restarts. Files, given or in `--cert-dir`, are read again when they change ([`Certificates`]).

use std::path::{Path, PathBuf};

use super::certificates::Certificates;
use super::error::TlsError;
use super::self_signed::SelfSignedPair;

/// Where a server's certificate comes from, chosen from the serving flags.
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

    /// The certificates this choice serves: the files (read again when they change), or the
    /// self-signed pair, made now in memory or reused from (else written to) `--cert-dir`.
    pub fn load(&self) -> Result<Certificates, TlsError> {
        match self {
            ServingCert::Files { cert, key } => Certificates::from_files(cert, key),
            ServingCert::SelfSigned {
                cert_dir: None,
                pair_name: _,
            } => {
                let pair = SelfSignedPair::generate()?;
                Certificates::from_pem(pair.cert_pem.as_bytes(), pair.key_pem.as_bytes())
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
                Certificates::from_files(cert, key)
            }
        }
    }
}

fn readable(path: &Path) -> bool {
    std::fs::File::open(path).is_ok()
}
