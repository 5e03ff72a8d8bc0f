//! [`WebhookServing`]: where and how the webhook server listens: its address
//! (`--webhook-bind-address`, `--webhook-secure-port`), its certificates ([`CertSource`]: files,
//! `--webhook-cert-dir` with `tls.crt`/`tls.key` as a mounted cert-manager Secret or
//! `--webhook-tls-cert-file`/`--webhook-tls-private-key-file`, read again when they change; or
//! self-managed, [`SelfManagedCerts`]), the TLS flags, the `--webhooks` selection, and the
//! longest a review may take.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::certs::SelfManagedCerts;
use crate::serving::{SocketSharing, TlsSettings};

/// controller-runtime's default handler timeout; never more than the server's `?timeout=`.
pub const DEFAULT_HANDLER_TIMEOUT: Duration = Duration::from_secs(10);

/// The webhook server's settings.
#[derive(Clone, Debug)]
pub struct WebhookServing {
    /// The address to listen on (port 0 picks one).
    pub addr: SocketAddr,
    /// `SO_REUSEPORT`/`SO_REUSEADDR`.
    pub sharing: SocketSharing,
    /// Where the certificates come from.
    pub certificates: CertSource,
    /// TLS versions, cipher suites, HTTP/2.
    pub tls: TlsSettings,
    /// The `--webhooks` list.
    pub webhooks: Vec<String>,
    /// The longest a review may take.
    pub handler_timeout: Duration,
}

/// Where the webhook server's certificates come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertSource {
    /// A certificate chain file (PEM, serving certificate first) and its key, reloaded when
    /// they change.
    Files {
        /// The chain.
        cert: PathBuf,
        /// The key.
        key: PathBuf,
    },
    /// Made and rotated by the process, kept in a Secret all replicas share.
    SelfManaged(SelfManagedCerts),
}

impl WebhookServing {
    /// Listens on `addr` with `dir/tls.crt` and `dir/tls.key` (controller-runtime's layout), all
    /// webhooks on by default selected (`--webhooks=*`).
    pub fn from_cert_dir(addr: SocketAddr, dir: &Path) -> Self {
        Self::from_files(addr, dir.join("tls.crt"), dir.join("tls.key"))
    }

    /// Listens on `addr` with a certificate and key file.
    pub fn from_files(addr: SocketAddr, cert_file: PathBuf, key_file: PathBuf) -> Self {
        Self::new(
            addr,
            CertSource::Files {
                cert: cert_file,
                key: key_file,
            },
        )
    }

    /// Listens on `addr` with certificates it makes itself (see [`crate::certs`]).
    pub fn self_managed(addr: SocketAddr, certs: SelfManagedCerts) -> Self {
        Self::new(addr, CertSource::SelfManaged(certs))
    }

    fn new(addr: SocketAddr, certificates: CertSource) -> Self {
        WebhookServing {
            addr,
            sharing: SocketSharing::default(),
            certificates,
            tls: TlsSettings::default(),
            webhooks: vec!["*".to_string()],
            handler_timeout: DEFAULT_HANDLER_TIMEOUT,
        }
    }
}
