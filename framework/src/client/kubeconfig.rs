//! Loading a kubeconfig a flag names (`--kubeconfig`, `--authentication-kubeconfig`,
//! `--authorization-kubeconfig`) with errors that name the file, key path, line and column but
//! never a credential: kube's own parse error quotes the offending line, token and password
//! included, and its base64 errors quote a character of the key data.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig, LoadDataError};

use crate::config_file::{ConfigFileError, parse_yaml_documents};
use crate::files::{FileError, read_bounded};

/// Why a kubeconfig file could not be used; no variant carries a value from the file.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// The file could not be read (missing, unreadable, or larger than
    /// [`MAX_FILE_BYTES`](crate::files::MAX_FILE_BYTES)).
    #[error("cannot read kubeconfig {0}")]
    File(#[source] FileError),
    /// The file is not a kubeconfig: the key path, line and column of the fault.
    #[error("cannot use kubeconfig {}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong where.
        source: ConfigFileError,
    },
    /// The kubeconfig parsed but cannot be used (no current context, a bad server URL, a
    /// certificate or key that does not decode).
    #[error("cannot use kubeconfig {}: {reason}", path.display())]
    Use {
        /// The file.
        path: PathBuf,
        /// kube's reason, with any decoded data left out.
        reason: String,
    },
}

/// The client configuration in the kubeconfig at `path`, as kube reads it (relative file paths
/// resolved against the file's folder, documents merged, the current context's cluster and
/// user), with errors that never quote the file.
pub async fn config_from_kubeconfig(path: &Path) -> Result<kube::Config, KubeconfigError> {
    let bytes = read_bounded(path).map_err(KubeconfigError::File)?;
    // kube reads the file with the same YAML library and no options of its own: what parses
    // here parses there, so its error (with the line quoted) is never reached.
    parse_yaml_documents::<Kubeconfig>(&bytes).map_err(|source| KubeconfigError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    let unusable = |e: kube::config::KubeconfigError| KubeconfigError::Use {
        path: path.to_path_buf(),
        reason: redacted(&e),
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(unusable)?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(unusable)
}

/// kube's message for `e`, with what may quote the file's data taken out: its parse error
/// (only reached if the file changed since it was checked) and the details of base64 and PEM
/// decoding, which name an offending character.
pub(super) fn redacted(e: &kube::config::KubeconfigError) -> String {
    use kube::config::KubeconfigError as E;
    let data = |what: &str, field: &str, e: &LoadDataError| match e {
        LoadDataError::DecodeBase64(_) => {
            format!("failed to load {what}: {field} is not valid base64")
        }
        other => format!("failed to load {what}: {other}"),
    };
    match e {
        E::Parse(_) => "the file changed while it was read; it no longer parses".to_string(),
        E::LoadCertificateAuthority(d) => data(
            "certificate authority",
            "clusters[].cluster.certificate-authority-data",
            d,
        ),
        E::LoadClientCertificate(d) => data(
            "client certificate",
            "users[].user.client-certificate-data",
            d,
        ),
        E::LoadClientKey(d) => data("client key", "users[].user.client-key-data", d),
        E::ParseCertificates(_) => "failed to parse PEM-encoded certificates".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "kubeconfig_tests.rs"]
mod tests;
