//! [`AuthSetupError`]: why delegated authentication or authorization could not be set up.

use std::path::PathBuf;

/// Why delegated auth could not be set up; the process does not start.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    /// A delegated kubeconfig could not be loaded.
    #[error(
        "failed to get delegated {purpose} kubeconfig: {message} (check --{purpose}-kubeconfig)"
    )]
    Kubeconfig {
        /// `authentication` or `authorization`.
        purpose: String,
        /// What went wrong.
        message: String,
    },
    /// A CA file could not be read or parsed.
    #[error("unable to load {flag} {path}: {message}")]
    CaFile {
        /// The flag naming the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The ConfigMap lookup failed and `--authentication-tolerate-lookup-failure` is off.
    #[error(
        "unable to load configmap based request-header-client-ca-file: {0} (grant the extension-apiserver-authentication-reader Role in kube-system, or set --authentication-skip-lookup or --authentication-tolerate-lookup-failure)"
    )]
    Lookup(String),
}
