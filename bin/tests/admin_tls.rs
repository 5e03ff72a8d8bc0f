//! The admin port speaks HTTPS, as upstream's `--secure-port`: with no certificate given the
//! binary makes a self-signed one (kept in `--cert-dir`), and `--tls-cert-file` /
//! `--tls-private-key-file` replace it. Both are checked by fetching `/healthz` with a client that
//! trusts only the expected CA. `--dev` serves plain HTTP unless such a flag is given, so these
//! tests give one. The `--tls-*` flags map onto rustls, and a value it cannot honour stops the
//! start with the value named.

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

/// A TLS handshake with the admin server offering `versions` and ALPN `h2, http/1.1`: the
/// negotiated protocol, or the handshake error.
async fn handshake(
    ccm: &admin_support::Ccm,
    versions: &[&'static tokio_rustls::rustls::SupportedProtocolVersion],
) -> anyhow::Result<Option<Vec<u8>>> {
    use std::sync::Arc;

    use tokio_rustls::rustls::pki_types::ServerName;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};

    let mut roots = RootCertStore::empty();
    for cert in tokio_rustls::rustls::pki_types::CertificateDer::pem_file_iter(&ccm.ca)? {
        let _ = roots.add(cert?);
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(ccm.admin).await?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    Ok(tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec))
}

/// GET /healthz over HTTP/2 (negotiated by ALPN): status and body.
async fn http2_healthz(ccm: &admin_support::Ccm) -> anyhow::Result<(u16, String)> {
    use std::sync::Arc;

    use http_body_util::{BodyExt, Empty};
    use hyper::body::Bytes;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};

    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&ccm.ca)? {
        let _ = roots.add(cert?);
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(ccm.admin).await?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    let request = hyper::Request::get(format!("https://localhost:{}/healthz", ccm.admin.port()))
        .body(Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8(body.to_vec())?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_min_version_and_http2_follow_the_flags() -> anyhow::Result<()> {
    use tokio_rustls::rustls::version::{TLS12, TLS13};

    let env = kube_testenv::TestEnv::builder().start().await?;
    let dir = scratch_dir("admin-tls-flags")?;
    let ccm = admin_support::Ccm::start(&env, &dir, &[]).await?;
    assert_eq!(
        handshake(&ccm, &[&TLS12]).await?,
        Some(b"h2".to_vec()),
        "TLS 1.2 and HTTP/2 by default, as upstream"
    );
    assert_eq!(http2_healthz(&ccm).await?, (200, "ok".to_string()));
    drop(ccm);

    let dir = scratch_dir("admin-tls-flags-13")?;
    let ccm = admin_support::Ccm::start(
        &env,
        &dir,
        &[
            "--tls-min-version=VersionTLS13".into(),
            "--disable-http2-serving".into(),
        ],
    )
    .await?;
    assert!(
        handshake(&ccm, &[&TLS12]).await.is_err(),
        "--tls-min-version=VersionTLS13 refuses TLS 1.2"
    );
    assert_eq!(
        handshake(&ccm, &[&TLS13]).await?,
        Some(b"http/1.1".to_vec()),
        "--disable-http2-serving offers HTTP/1.1 only"
    );
    Ok(())
}

#[test]
fn tls_values_rustls_cannot_honour_stop_the_start_by_name() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"))
        .args([
            "--cloud-provider=fake",
            "--tls-min-version=VersionTLS10",
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_RSA_WITH_AES_128_CBC_SHA",
            "--tls-curve-preferences=CurveP521",
            "--tls-sni-cert-key=a.crt,a.key:10.0.0.1",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for value in [
        "--tls-min-version=VersionTLS10",
        "TLS_RSA_WITH_AES_128_CBC_SHA is not implemented",
        "CurveP521",
        "the IP pattern 10.0.0.1",
    ] {
        assert!(stderr.contains(value), "{value}: {stderr}");
    }
    assert!(
        !stderr.contains("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 is"),
        "a supported suite is not refused: {stderr}"
    );
}

/// 300 clients dripping their headers a byte a second at the admin port of a binary limited to
/// 256 open files: the connection cap keeps most descriptors for the rest of the process, so the
/// controllers still reach the API server and a new LoadBalancer Service is provisioned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_flood_on_the_admin_port_leaves_the_controllers_unaffected()
-> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Service;
    use kube::api::{Api, PostParams};
    use tokio::io::AsyncWriteExt;

    let dir = scratch_dir("admin-flood")?;
    let binary = DevBinary::start_with(&dir, Admin::Http, Some(256)).await?;
    binary.wait_until_reconciled().await?;
    let stop = tokio_util::sync::CancellationToken::new();
    let mut flood = tokio::task::JoinSet::new();
    for _ in 0..300 {
        let (addr, stop) = (binary.admin, stop.clone());
        flood.spawn(async move {
            let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
                return;
            };
            for byte in b"GET /metrics HTTP/1.1\r\nX-Slow: ".iter().cycle() {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                }
                if stream.write_all(&[*byte]).await.is_err() {
                    return;
                }
            }
        });
    }
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;

    let services: Api<Service> = Api::namespaced(binary.client().await?, "default");
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "during-flood"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "x"}, "ports": [{"port": 80}]}
    }))?;
    let provisioned = |s: Option<&Service>| {
        s.and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.as_ref())
            .is_some_and(|i| !i.is_empty())
    };
    // Sooner than the 32 s header timeout frees anything: only the cap can have kept the
    // descriptors free.
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        services.create(&PostParams::default(), &svc).await?;
        kube::runtime::wait::await_condition(services, "during-flood", provisioned).await?;
        anyhow::Ok(())
    })
    .await
    .map_err(|_| anyhow::anyhow!("not provisioned within 20 s of a flood on the admin port"))??;
    stop.cancel();
    while flood.join_next().await.is_some() {}
    Ok(())
}
