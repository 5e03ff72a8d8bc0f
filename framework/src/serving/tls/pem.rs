//! Certificate chains and private keys read from PEM, files or memory, each failure naming where
//! the PEM came from.

use std::path::{Path, PathBuf};

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::error::TlsError;

/// Every CERTIFICATE block of `pem`, in order; at least one.
pub(super) fn chain(pem: &[u8], from: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(from, e.to_string()))?;
    if chain.is_empty() {
        return Err(failed(from, "no PEM CERTIFICATE block".to_string()));
    }
    Ok(chain)
}

/// The first private key of `pem`.
pub(super) fn key(pem: &[u8], from: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| failed(from, e.to_string()))
}

/// The whole of `path` (bounded by [`crate::files::MAX_FILE_BYTES`]).
pub(super) fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    crate::files::read_bounded(path).map_err(|e| failed(path, e.to_string()))
}

/// Where PEM that was never a file came from, in errors.
pub(super) fn in_memory() -> PathBuf {
    PathBuf::from("<in memory>")
}

fn failed(path: &Path, message: String) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        message,
    }
}
