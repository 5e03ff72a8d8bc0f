//! The admin port speaks HTTPS, as upstream's `--secure-port`: with no certificate given the
//! binary makes a self-signed one (kept in `--cert-dir`), and `--tls-cert-file` /
//! `--tls-private-key-file` replace it. Both are checked by fetching `/healthz` with a client that
//! trusts only the expected CA. `--dev` serves plain HTTP unless such a flag is given, so these
//! tests give one.

mod admin_support;

use admin_support::{Admin, DevBinary, cert_dir, http_get, https_get, scratch_dir};
use controller_manager::admin::SelfSignedPair;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_over_https_with_the_generated_certificate() -> anyhow::Result<()> {
    let dir = scratch_dir("admin-tls-generated")?;
    let binary = DevBinary::start(&dir, Admin::GeneratedCert).await?;
    binary.wait_until_reconciled().await?;

    let healthz = binary.get("/healthz").await?;
    assert_eq!((healthz.status, healthz.body.as_str()), (200, "ok"));
    assert!(
        cert_dir(&dir).join("cloud-controller-manager.key").exists(),
        "--cert-dir keeps the generated key"
    );
    assert!(
        http_get(binary.admin, "/healthz").await.is_err(),
        "plain HTTP must not be answered"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_cert_file_and_key_replace_the_generated_certificate() -> anyhow::Result<()> {
    let dir = scratch_dir("admin-tls-files")?;
    let (cert, key) = (dir.join("serving.crt"), dir.join("serving.key"));
    SelfSignedPair::generate()?.write(&cert, &key)?;
    let binary = DevBinary::start(&dir, Admin::CertFiles { cert, key }).await?;
    binary.wait_until_reconciled().await?;

    let healthz = binary.get("/healthz").await?;
    assert_eq!((healthz.status, healthz.body.as_str()), (200, "ok"));
    assert!(
        !cert_dir(&dir).exists(),
        "--cert-dir is ignored when files are given, as upstream"
    );
    // A client trusting some other CA refuses the connection.
    let other = dir.join("other.crt");
    SelfSignedPair::generate()?.write(&other, &dir.join("other.key"))?;
    assert!(https_get(binary.admin, "/healthz", &other).await.is_err());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_alone_serves_plain_http() -> anyhow::Result<()> {
    let dir = scratch_dir("admin-dev-http")?;
    let binary = DevBinary::start(&dir, Admin::Http).await?;
    binary.wait_until_reconciled().await?;
    let healthz = http_get(binary.admin, "/healthz").await?;
    assert_eq!((healthz.status, healthz.body.as_str()), (200, "ok"));
    Ok(())
}
