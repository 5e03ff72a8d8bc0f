//! Certificate sources: generated pairs verify as upstream's do, `--cert-dir` persists and reuses
//! them, bad files fail with the file's name, and files are reloaded when they change.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_rustls::rustls::RootCertStore;
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::client::danger::ServerCertVerifier;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::{ServerName, UnixTime};

use super::*;

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cm-tls-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn a_generated_pair_is_a_localhost_serving_cert_signed_by_its_own_ca() {
    let pair = SelfSignedPair::generate().expect("generate");
    let chain = pem::chain(pair.cert_pem.as_bytes(), &pem::in_memory()).expect("chain");
    assert_eq!(chain.len(), 2, "serving certificate, then the CA");
    let mut roots = RootCertStore::empty();
    roots.add(chain[1].clone()).expect("CA as root");
    let verifier = WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(ring::default_provider()),
    )
    .build()
    .expect("verifier");
    for name in ["localhost", "127.0.0.1"] {
        let name = ServerName::try_from(name).expect("name");
        verifier
            .verify_server_cert(&chain[0], &[], &name, &[], UnixTime::now())
            .unwrap_or_else(|e| panic!("{name:?}: {e}"));
    }
    let other = ServerName::try_from("example.com").expect("name");
    assert!(
        verifier
            .verify_server_cert(&chain[0], &[], &other, &[], UnixTime::now())
            .is_err()
    );
    let in_memory = ServingCert::SelfSigned {
        cert_dir: None,
        pair_name: "ccm".into(),
    };
    let tls = Tls::new(in_memory.load().expect("load"), &TlsSettings::default()).expect("config");
    assert_eq!(
        tls.config().alpn_protocols,
        [b"h2".to_vec(), b"http/1.1".to_vec()],
        "HTTP/2 first, as Go's server"
    );
}

#[test]
fn cert_dir_keeps_the_generated_pair_and_reuses_it() {
    let dir = scratch("reuse");
    let source = ServingCert::SelfSigned {
        cert_dir: Some(dir.clone()),
        pair_name: "cloud-controller-manager".into(),
    };
    source.load().expect("first start");
    let cert = dir.join("cloud-controller-manager.crt");
    let key = dir.join("cloud-controller-manager.key");
    let first = std::fs::read_to_string(&cert).expect("cert written");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).expect("key").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the key is private");
    }
    source.load().expect("second start");
    assert_eq!(
        std::fs::read_to_string(&cert).expect("cert"),
        first,
        "reused, not regenerated"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn explicit_files_win_over_cert_dir_and_are_checked() {
    let dir = scratch("files");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let source = ServingCert::from_flags(Some(&cert), Some(&key), Some(&dir), "ccm");
    assert_eq!(
        source,
        ServingCert::Files {
            cert: cert.clone(),
            key: key.clone()
        }
    );
    match source.load() {
        Err(TlsError::File { path, .. }) => assert_eq!(path, cert),
        other => panic!("missing file must be named: {other:?}"),
    }

    // A key that does not belong to the certificate is refused.
    let a = SelfSignedPair::generate().expect("a");
    let b = SelfSignedPair::generate().expect("b");
    SelfSignedPair {
        cert_pem: a.cert_pem,
        key_pem: b.key_pem,
    }
    .write(&cert, &key)
    .expect("write");
    assert!(matches!(source.load(), Err(TlsError::Config(_))));
    let _ = std::fs::remove_dir_all(&dir);

    assert_eq!(
        ServingCert::from_flags(None, None, None, "ccm"),
        ServingCert::SelfSigned {
            cert_dir: None,
            pair_name: "ccm".into()
        }
    );
}
