//! [`CertsError`]: what goes wrong making, keeping or reading the certificates.

use crate::serving::TlsError;

/// Why the certificates could not be made, kept or read.
#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    /// The API server refused or failed.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// rcgen could not make a key or certificate.
    #[error("cannot make a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The pair cannot be served.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The Secret or a managed object is not what it should be.
    #[error("{0}")]
    Invalid(String),
}
