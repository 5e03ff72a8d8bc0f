//! [`WebhookServing`]: where and how the webhook server listens: its address
//! (`--webhook-bind-address`, `--webhook-secure-port`), its certificate files (`--webhook-cert-dir`
//! with `tls.crt`/`tls.key`, as a mounted cert-manager Secret, or
//! `--webhook-tls-cert-file`/`--webhook-tls-private-key-file`), read again when they change, the
//! TLS flags, the `--webhooks` selection, and the longest a review may take.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::serving::{Certificates, SocketSharing, Tls, TlsError, TlsSettings};

/// controller-runtime's default handler timeout; never more than the server's `?timeout=`.
pub const DEFAULT_HANDLER_TIMEOUT: Duration = Duration::from_secs(10);

/// The webhook server's settings.
#[derive(Clone, Debug)]
pub struct WebhookServing {
    /// The address to listen on (port 0 picks one).
    pub addr: SocketAddr,
    /// `SO_REUSEPORT`/`SO_REUSEADDR`.
    pub sharing: SocketSharing,
    /// The serving certificate chain (PEM, serving certificate first).
    pub cert_file: PathBuf,
    /// Its private key (PEM).
    pub key_file: PathBuf,
    /// TLS versions, cipher suites, HTTP/2.
    pub tls: TlsSettings,
    /// The `--webhooks` list.
    pub webhooks: Vec<String>,
    /// The longest a review may take.
    pub handler_timeout: Duration,
}

impl WebhookServing {
    /// Listens on `addr` with `dir/tls.crt` and `dir/tls.key` (controller-runtime's layout), all
    /// webhooks on by default selected (`--webhooks=*`).
    pub fn from_cert_dir(addr: SocketAddr, dir: &Path) -> Self {
        Self::from_files(addr, dir.join("tls.crt"), dir.join("tls.key"))
    }

    /// Listens on `addr` with a certificate and key file.
    pub fn from_files(addr: SocketAddr, cert_file: PathBuf, key_file: PathBuf) -> Self {
        WebhookServing {
            addr,
            sharing: SocketSharing::default(),
            cert_file,
            key_file,
            tls: TlsSettings::default(),
            webhooks: vec!["*".to_string()],
            handler_timeout: DEFAULT_HANDLER_TIMEOUT,
        }
    }

    /// The server's TLS; a missing, unreadable or mismatched pair is the error, naming the
    /// file. Later changes to the files are served from the next handshake on, and a change
    /// that does not load keeps the last good pair serving.
    pub fn tls(&self) -> Result<Tls, TlsError> {
        let certificates = Certificates::from_files(&self.cert_file, &self.key_file)?;
        Tls::new(certificates, &self.tls)
    }
}
