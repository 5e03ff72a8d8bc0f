//! Shared by the tests that run the built `cloud-controller-manager` binary and talk to its admin
//! port: starting it with `--dev` on free ports (or against a test's own kube-testenv), waiting
//! for it, and GET requests to the admin server, anonymous or with a bearer token or a client
//! certificate.
#![allow(dead_code)] // each test binary uses a different subset

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

/// Generous: the binary is a debug build and the machine is shared.
pub const DEADLINE: Duration = Duration::from_secs(90);

/// A port nobody listened on a moment ago (the OS does not hand it out again at once).
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// A fresh directory under the system temp dir, unique to this test process and `tag`.
pub fn scratch_dir(tag: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("ccm-{tag}-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The binary running `--dev`; killed when dropped.
pub struct DevBinary {
    child: Child,
    /// Where the admin server listens.
    pub admin: SocketAddr,
    /// The kubeconfig `--dev` wrote for its embedded API server.
    pub kubeconfig: PathBuf,
    /// The CA file to trust for HTTPS, or `None` when the admin port serves plain HTTP.
    pub ca: Option<PathBuf>,
}

/// How the binary's admin port is set up.
pub enum Admin {
    /// `--dev`'s default: plain HTTP.
    Http,
    /// HTTPS with the generated pair, kept in `<dir>/certs` by `--cert-dir`.
    GeneratedCert,
    /// HTTPS with `--tls-cert-file` / `--tls-private-key-file`.
    CertFiles {
        /// Chain file (also trusted by the test's client).
        cert: PathBuf,
        /// Key file.
        key: PathBuf,
    },
}

/// Where `--cert-dir` points in [`Admin::GeneratedCert`].
pub fn cert_dir(dir: &Path) -> PathBuf {
    dir.join("certs")
}

impl DevBinary {
    /// Starts `cloud-controller-manager --dev` with the admin server on a free loopback port,
    /// plus `extra` flags, and returns once the embedded API server is up (the binary says so on
    /// stdout after writing the kubeconfig).
    pub async fn start(dir: &Path, admin: Admin) -> anyhow::Result<Self> {
        Self::start_with(dir, admin, None).await
    }

    /// As [`Self::start`], under an open-file limit of `nofile` when given (through util-linux's
    /// `prlimit`, so the limit holds from the first instruction).
    pub async fn start_with(dir: &Path, admin: Admin, nofile: Option<u64>) -> anyhow::Result<Self> {
        let port = free_port()?;
        let kubeconfig = dir.join("kubeconfig");
        let (extra, ca) = match admin {
            Admin::Http => (vec![], None),
            Admin::GeneratedCert => (
                vec![format!("--cert-dir={}", cert_dir(dir).display())],
                Some(cert_dir(dir).join("cloud-controller-manager.crt")),
            ),
            Admin::CertFiles { cert, key } => (
                vec![
                    format!("--tls-cert-file={}", cert.display()),
                    format!("--tls-private-key-file={}", key.display()),
                    // Must be ignored when files are given, as upstream.
                    format!("--cert-dir={}", cert_dir(dir).display()),
                ],
                Some(cert),
            ),
        };
        let binary = env!("CARGO_BIN_EXE_cloud-controller-manager");
        let mut command = match nofile {
            Some(n) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={n}:{n}")).arg("--").arg(binary);
                c
            }
            None => Command::new(binary),
        };
        let mut child = command
            .arg("--dev")
            .arg(format!("--secure-port={port}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--dev-kubeconfig={}", kubeconfig.display()))
            .args(&extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting cloud-controller-manager")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (up_tx, up_rx) = oneshot::channel();
        // A plain thread: the pipe is blocking, and it must keep draining so the child never
        // blocks on a full pipe.
        std::thread::spawn(move || {
            let mut up = Some(up_tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("The embedded API server is at")
                    && let Some(tx) = up.take()
                {
                    let _ = tx.send(());
                }
            }
        });
        let binary = DevBinary {
            child,
            admin: SocketAddr::from(([127, 0, 0, 1], port)),
            kubeconfig,
            ca,
        };
        match tokio::time::timeout(DEADLINE, up_rx).await {
            Ok(Ok(())) => Ok(binary),
            Ok(Err(_)) => {
                bail!("cloud-controller-manager --dev exited before its API server was up")
            }
            Err(_) => bail!("cloud-controller-manager --dev did not start within {DEADLINE:?}"),
        }
    }

    /// GET `path` from the admin server, over HTTPS trusting [`Self::ca`] when it has one.
    pub async fn get(&self, path: &str) -> anyhow::Result<Response> {
        match &self.ca {
            Some(ca) => https_get(self.admin, path, ca).await,
            None => http_get(self.admin, path).await,
        }
    }

    /// Waits until the dev Service has its ingress IP: by then the manager serves its admin port
    /// (started before the controllers) and every controller has reconciled.
    pub async fn wait_until_reconciled(&self) -> anyhow::Result<()> {
        use k8s_openapi::api::core::v1::Service;
        let services: kube::Api<Service> = kube::Api::namespaced(self.client().await?, "default");
        let has_ingress = |s: Option<&Service>| {
            s.and_then(|s| s.status.as_ref())
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .is_some_and(|i| !i.is_empty())
        };
        tokio::time::timeout(
            DEADLINE,
            kube::runtime::wait::await_condition(services, "hello", has_ingress),
        )
        .await??;
        Ok(())
    }

    /// A client for the embedded API server, from the kubeconfig the binary wrote.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }
}

impl Drop for DevBinary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The answer to one GET.
pub struct Response {
    pub status: u16,
    pub content_type: String,
    /// The body as text (invalid UTF-8 replaced); [`Self::bytes`] has it as sent.
    pub body: String,
    pub bytes: Vec<u8>,
}

/// GET `path` from a plain HTTP server at `addr` over a fresh HTTP/1.1 connection.
pub async fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<Response> {
    let stream = TcpStream::connect(addr).await?;
    send_get(TokioIo::new(stream), addr, path).await
}

/// What a request presents to the admin server.
#[derive(Default)]
pub enum Credentials {
    /// Nothing: the caller is anonymous.
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Token(String),
    /// A client certificate chain and its key (PKCS#8 DER).
    Cert(Vec<CertificateDer<'static>>, Vec<u8>),
    /// A front proxy: its client certificate and key, and the identity headers it asserts.
    Proxy(
        Vec<CertificateDer<'static>>,
        Vec<u8>,
        Vec<(&'static str, String)>,
    ),
}

/// GET `path` over HTTPS from `addr` (as `localhost`), trusting every certificate in `ca_file`.
pub async fn https_get(addr: SocketAddr, path: &str, ca_file: &Path) -> anyhow::Result<Response> {
    https_get_as(addr, path, ca_file, &Credentials::None).await
}

/// As [`https_get`], presenting `credentials`.
pub async fn https_get_as(
    addr: SocketAddr,
    path: &str,
    ca_file: &Path,
    credentials: &Credentials,
) -> anyhow::Result<Response> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca_file)
        .with_context(|| format!("reading {}", ca_file.display()))?
    {
        // The serving certificate is not a CA; only the CA behind it becomes a trust anchor.
        let _ = roots.add(cert?);
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let key = |key: &Vec<u8>| PrivateKeyDer::try_from(key.clone()).map_err(anyhow::Error::msg);
    let (config, headers) = match credentials {
        Credentials::Cert(chain, k) => (
            builder.with_client_auth_cert(chain.clone(), key(k)?)?,
            vec![],
        ),
        Credentials::Proxy(chain, k, headers) => (
            builder.with_client_auth_cert(chain.clone(), key(k)?)?,
            headers.clone(),
        ),
        Credentials::Token(token) => (
            builder.with_no_client_auth(),
            vec![("authorization", format!("Bearer {token}"))],
        ),
        Credentials::None => (builder.with_no_client_auth(), vec![]),
    };
    let stream = TcpStream::connect(addr).await?;
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost")?, stream)
        .await?;
    send(TokioIo::new(tls), addr, path, &headers).await
}

async fn send_get<T>(io: T, addr: SocketAddr, path: &str) -> anyhow::Result<Response>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    send(io, addr, path, &[]).await
}

async fn send<T>(
    io: T,
    addr: SocketAddr,
    path: &str,
    headers: &[(&'static str, String)],
) -> anyhow::Result<Response>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(connection);
    let mut request = hyper::Request::get(path).header(hyper::header::HOST, addr.to_string());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let request = request.body(Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let bytes = response.into_body().collect().await?.to_bytes().to_vec();
    Ok(Response {
        status,
        content_type,
        body: String::from_utf8_lossy(&bytes).into_owned(),
        bytes,
    })
}

/// The binary run against a test's own kube-testenv (not `--dev`), serving HTTPS on a free
/// loopback port with its generated certificate in `<dir>/certs`; killed when dropped.
pub struct Ccm {
    child: Child,
    /// Where the admin server listens.
    pub admin: SocketAddr,
    /// The CA to trust for HTTPS.
    pub ca: PathBuf,
    /// Its stderr (the log).
    pub log: PathBuf,
}

impl Ccm {
    /// Starts `cloud-controller-manager --cloud-provider=fake` with `--kubeconfig` (admin) for
    /// `env`, plus `extra` flags, and returns once the admin server listens. Fails with the log
    /// when the process exits first.
    pub async fn start(
        env: &kube_testenv::TestEnv,
        dir: &Path,
        extra: &[String],
    ) -> anyhow::Result<Ccm> {
        let port = free_port()?;
        let kubeconfig = dir.join("kubeconfig");
        env.write_kubeconfig(&kubeconfig)?;
        let log = dir.join("ccm.log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args([
                "--cloud-provider=fake",
                "--configure-cloud-routes=false",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
            ])
            .arg(format!("--secure-port={port}"))
            .arg(format!("--cert-dir={}", cert_dir(dir).display()))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting cloud-controller-manager")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let (up_tx, up_rx) = oneshot::channel();
        let log_file = log.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut up = Some(up_tx);
            let mut file = std::fs::File::create(log_file).ok();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(f) = file.as_mut() {
                    let _ = writeln!(f, "{line}");
                }
                if line.contains("admin server listening")
                    && let Some(tx) = up.take()
                {
                    let _ = tx.send(());
                }
            }
        });
        let ccm = Ccm {
            child,
            admin: SocketAddr::from(([127, 0, 0, 1], port)),
            ca: cert_dir(dir).join("cloud-controller-manager.crt"),
            log,
        };
        match tokio::time::timeout(DEADLINE, up_rx).await {
            Ok(Ok(())) => Ok(ccm),
            Ok(Err(_)) => bail!(
                "cloud-controller-manager exited before serving:\n{}",
                ccm.logs()
            ),
            Err(_) => bail!(
                "cloud-controller-manager did not serve within {DEADLINE:?}:\n{}",
                ccm.logs()
            ),
        }
    }

    /// GET `path` from the admin server with `credentials`.
    pub async fn get(&self, path: &str, credentials: &Credentials) -> anyhow::Result<Response> {
        https_get_as(self.admin, path, &self.ca, credentials).await
    }

    /// What the process logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then the exit status once the process has drained and exited.
    pub async fn terminate(&mut self) -> anyhow::Result<std::process::ExitStatus> {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        anyhow::ensure!(sent.success(), "kill -TERM failed: {sent}");
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "did not exit within {DEADLINE:?} of SIGTERM:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Ccm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
