//! The one way the process reads a file it is pointed at by a flag (`--cloud-config`, the
//! kubeconfigs, the certificate and CA files): whole, and never more than [`MAX_FILE_BYTES`]. A
//! path to `/dev/zero` or to a runaway file is refused within milliseconds with its name and the
//! limit, instead of growing until the OOM killer ends the process (22.5 GB before this, with
//! SIGTERM unheeded meanwhile).

use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest file read: far above any real kubeconfig, certificate bundle or cloud config.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Opening or reading failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file holds more than [`MAX_FILE_BYTES`].
    #[error("{}: larger than {limit} bytes; is this the right file?", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit it passed.
        limit: u64,
    },
}

impl FileError {
    /// The I/O error, when that is what it was.
    pub fn io(&self) -> Option<&std::io::Error> {
        match self {
            FileError::Io { source, .. } => Some(source),
            FileError::TooLarge { .. } => None,
        }
    }
}

/// Reads `path` whole, refusing a file of more than [`MAX_FILE_BYTES`].
pub fn read_bounded(path: &Path) -> Result<Vec<u8>, FileError> {
    read_at_most(path, MAX_FILE_BYTES)
}

fn read_at_most(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let io = |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_within_the_limit_is_read_whole() {
        let path = std::env::temp_dir().join(format!("files-ok-{}", std::process::id()));
        std::fs::write(&path, b"abc").unwrap();
        assert_eq!(read_at_most(&path, 3).unwrap(), b"abc");
        let err = read_at_most(&path, 2).unwrap_err();
        assert!(matches!(err, FileError::TooLarge { limit: 2, .. }), "{err}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    #[cfg(unix)]
    fn an_endless_file_is_refused_with_its_name() {
        let err = read_bounded(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("/dev/zero: larger than {MAX_FILE_BYTES} bytes; is this the right file?")
        );
    }

    #[test]
    fn a_missing_file_says_so() {
        let err = read_bounded(Path::new("/nonexistent/x")).unwrap_err();
        assert_eq!(
            err.io().map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );
        assert!(err.to_string().starts_with("/nonexistent/x: "), "{err}");
    }
}
