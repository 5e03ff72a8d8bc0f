//! [`Certificates`]: what a server presents in its handshakes, swappable while it serves. The
//! default certificate comes from files (`--tls-cert-file`, a mounted Secret) or from memory (the
//! self-signed fallback, or a certificate the process rotates itself); the `--tls-sni-cert-key`
//! certificates always come from files. Files are read again by [`Certificates::reload`], which
//! the server calls every [`RELOAD_EVERY`] (upstream's dynamic serving certificate watches them
//! too): a change is served from the next handshake on, and a change that does not load (a
//! half-written file, a key that does not match) keeps the previous certificates and is logged
//! once, until the files change again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

use super::error::TlsError;
use super::pem;
use super::settings::SniCertKey;
use super::sni::CertSet;

/// How often a server re-reads its certificate files.
pub const RELOAD_EVERY: Duration = Duration::from_secs(10);

/// Where the default certificate comes from.
#[derive(Debug)]
enum DefaultCert {
    Files { cert: PathBuf, key: PathBuf },
    Memory(Arc<CertifiedKey>),
}

/// The certificates a server presents; clones share them, so a rotation through one clone is
/// what every server holding another presents.
#[derive(Clone, Debug)]
pub struct Certificates {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    default: Mutex<DefaultCert>,
    sni: Vec<SniCertKey>,
    current: RwLock<Arc<CertSet>>,
    /// The file contents last tried, loaded or refused; unchanged files are not parsed again.
    seen: Mutex<Vec<Vec<u8>>>,
}

impl Certificates {
    /// A certificate chain (PEM, serving certificate first) and its private key held in memory;
    /// [`Self::replace_pem`] rotates them.
    pub fn from_pem(chain_pem: &[u8], key_pem: &[u8]) -> Result<Self, TlsError> {
        let key = certified(chain_pem, key_pem, &pem::in_memory(), &pem::in_memory())?;
        Self::build(DefaultCert::Memory(key), Vec::new())
    }

    /// A certificate chain file (PEM, serving certificate first) and its private key file, read
    /// now and again whenever they change.
    pub fn from_files(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Self, TlsError> {
        let (cert, key) = (cert.into(), key.into());
        Self::build(DefaultCert::Files { cert, key }, Vec::new())
    }

    /// These certificates plus `sni`, each presented to clients asking for its names
    /// (`--tls-sni-cert-key`), read now and again whenever they change.
    pub fn with_sni(self, sni: &[SniCertKey]) -> Result<Self, TlsError> {
        if sni.is_empty() {
            return Ok(self);
        }
        let default = match &*self.shared.default.lock() {
            DefaultCert::Files { cert, key } => DefaultCert::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            DefaultCert::Memory(key) => DefaultCert::Memory(key.clone()),
        };
        Self::build(default, sni.to_vec())
    }

    /// Presents `chain_pem` and `key_pem` as the default certificate from the next handshake on
    /// (a certificate the process rotates itself); files named for the default certificate are
    /// no longer read. On an error nothing changes.
    pub fn replace_pem(&self, chain_pem: &[u8], key_pem: &[u8]) -> Result<(), TlsError> {
        let key = certified(chain_pem, key_pem, &pem::in_memory(), &pem::in_memory())?;
        let mut default = self.shared.default.lock();
        *default = DefaultCert::Memory(key.clone());
        let mut current = self.shared.current.write();
        *current = Arc::new(current.with_default(key));
        Ok(())
    }

    /// Reads the certificate files again and, if they changed and load, presents them from the
    /// next handshake on: `Ok(true)`. Unchanged files (or none to read) are `Ok(false)`; a change
    /// that does not load is the error, and the previous certificates stay.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let default = self.shared.default.lock();
        let contents = read_files(&default, &self.shared.sni)?;
        let mut seen = self.shared.seen.lock();
        if *seen == contents {
            return Ok(false);
        }
        *seen = contents;
        let set = load(&default, &self.shared.sni, &seen)?;
        *self.shared.current.write() = Arc::new(set);
        Ok(true)
    }

    /// Whether [`Self::reload`] has any file to read.
    pub(super) fn has_files(&self) -> bool {
        !self.shared.sni.is_empty()
            || matches!(&*self.shared.default.lock(), DefaultCert::Files { .. })
    }

    /// The certificates presented now.
    pub(super) fn current(&self) -> Arc<CertSet> {
        self.shared.current.read().clone()
    }

    /// Reloads every `every` until `stop`, logging what changed and what could not be loaded.
    pub(in crate::serving) async fn watch(self, every: Duration, stop: CancellationToken) {
        if !self.has_files() {
            return;
        }
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            let this = self.clone();
            match tokio::task::spawn_blocking(move || this.reload()).await {
                Ok(Ok(true)) => tracing::info!("serving certificates reloaded"),
                Ok(Ok(false)) => {}
                Ok(Err(error)) => {
                    tracing::warn!(%error, "cannot reload the serving certificates; still serving the previous ones")
                }
                Err(error) => tracing::warn!(%error, "the certificate reload task failed"),
            }
        }
    }

    fn build(default: DefaultCert, sni: Vec<SniCertKey>) -> Result<Self, TlsError> {
        let contents = read_files(&default, &sni)?;
        let set = load(&default, &sni, &contents)?;
        Ok(Certificates {
            shared: Arc::new(Shared {
                default: Mutex::new(default),
                sni,
                current: RwLock::new(Arc::new(set)),
                seen: Mutex::new(contents),
            }),
        })
    }
}

/// The certificate and key file contents: the default's when it is from files, then each SNI
/// pair's.
fn read_files(default: &DefaultCert, sni: &[SniCertKey]) -> Result<Vec<Vec<u8>>, TlsError> {
    let files = match default {
        DefaultCert::Files { cert, key } => Some((cert.as_path(), key.as_path())),
        DefaultCert::Memory(_) => None,
    };
    let mut contents = Vec::new();
    for (cert, key) in files
        .into_iter()
        .chain(sni.iter().map(|p| (p.cert.as_path(), p.key.as_path())))
    {
        contents.push(pem::read(cert)?);
        contents.push(pem::read(key)?);
    }
    Ok(contents)
}

/// The set `default`, `sni` and their file `contents` (as [`read_files`] returns them) make.
fn load(
    default: &DefaultCert,
    sni: &[SniCertKey],
    contents: &[Vec<u8>],
) -> Result<CertSet, TlsError> {
    let mut files = contents.chunks_exact(2).map(|pair| (&pair[0], &pair[1]));
    let mut next = |cert: &Path, key: &Path| match files.next() {
        Some((c, k)) => certified(c, k, cert, key),
        None => Err(TlsError::File {
            path: cert.to_path_buf(),
            message: "not read".to_string(),
        }),
    };
    let default = match default {
        DefaultCert::Files { cert, key } => next(cert, key)?,
        DefaultCert::Memory(key) => key.clone(),
    };
    let mut pairs = Vec::new();
    for pair in sni {
        pairs.push((next(&pair.cert, &pair.key)?, pair.names.clone()));
    }
    Ok(CertSet::new(default, pairs))
}

/// A chain and key that belong together, as rustls serves them.
fn certified(
    chain_pem: &[u8],
    key_pem: &[u8],
    chain_from: &Path,
    key_from: &Path,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain = pem::chain(chain_pem, chain_from)?;
    let key = pem::key(key_pem, key_from)?;
    Ok(Arc::new(CertifiedKey::from_der(
        chain,
        key,
        &ring::default_provider(),
    )?))
}
