//! [`TlsError`]: why a server's certificates could not be loaded or made.

use std::io;
use std::path::PathBuf;

/// Why a server's TLS material could not be loaded or made; each says what to change.
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
