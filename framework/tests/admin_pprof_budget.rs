//! `/debug/pprof` within its memory bound, over real HTTPS behind delegated authentication and
//! authorization against kube-testenv (RBAC enforced): anonymous, unknown and ungranted callers
//! are refused before any profile starts; for a granted caller a CPU profile samples and
//! symbolises this process, one profile of each kind runs at a time (a second is a 503), a
//! profile whose reservation would take the running ones past `PROFILING_MEMORY_BOUND` is a 503
//! saying so, and a reservation is given back when its profile is done or its caller hangs up.
//! The heap profiler is a stand-in whose size and timing the test controls; the stock binary's
//! jemalloc profiler is covered in bin/tests/admin_pprof.rs.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use controller_manager::admin::{
    AdminServer, AllowPaths, DelegatedAuth, DelegatedAuthConfig, HealthChecks, HeapProfiler,
    Profiling, RequestHeaderFlags, SelfSignedPair, TlsSettings,
};
use controller_manager::profiling::{
    CPU_PROFILE_BYTES, PROFILING_MEMORY_BOUND, SYMBOL_TABLE_BYTES,
};
use controller_manager::serving::{Certificates, Tls};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::PostParams;
use kube_testenv::TestEnv;
use pprof::protos::{Message, Profile};
use serde_json::json;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_util::sync::CancellationToken;

/// Long enough for a loaded machine; every wait ends as soon as its condition holds.
const DEADLINE: Duration = Duration::from_secs(60);

/// A heap profiler that reserves `bound` bytes and answers once `open`.
struct StandIn {
    bound: usize,
    open: AtomicBool,
    started: AtomicUsize,
}

impl StandIn {
    fn new(bound: usize) -> Arc<Self> {
        Arc::new(StandIn {
            bound,
            open: AtomicBool::new(false),
            started: AtomicUsize::new(0),
        })
    }
}

impl HeapProfiler for StandIn {
    fn heap_profile(&self) -> Result<Vec<u8>, String> {
        self.started.fetch_add(1, Ordering::SeqCst);
        while !self.open.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(b"heap".to_vec())
    }

    fn memory_bound(&self) -> usize {
        self.bound
    }
}

/// kube-testenv enforcing RBAC, where ServiceAccount `default/profiler` may GET
/// `/debug/pprof/*`, and the delegated auth the admin servers use against it.
struct Cluster {
    env: TestEnv,
    auth: Arc<DelegatedAuth>,
    granted: String,
    pair: SelfSignedPair,
    dir: std::path::PathBuf,
}

impl Cluster {
    async fn start() -> Cluster {
        let env = TestEnv::builder()
            .authorization(true)
            .start()
            .await
            .unwrap();
        let role: ClusterRole = serde_json::from_value(json!({
            "metadata": {"name": "pprof-reader"},
            "rules": [{"nonResourceURLs": ["/debug/pprof/*"], "verbs": ["get"]}]
        }))
        .unwrap();
        Api::<ClusterRole>::all(env.client())
            .create(&PostParams::default(), &role)
            .await
            .unwrap();
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": "pprof-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pprof-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "profiler", "namespace": "default"}]
        }))
        .unwrap();
        Api::<ClusterRoleBinding>::all(env.client())
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
        let dir = std::env::temp_dir().join(format!("cm-pprof-budget-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        env.write_kubeconfig(&kubeconfig).unwrap();
        let auth = DelegatedAuth::build(&DelegatedAuthConfig {
            authentication_kubeconfig: Some(kubeconfig.clone()),
            authorization_kubeconfig: Some(kubeconfig),
            skip_lookup: true,
            tolerate_lookup_failure: false,
            token_cache_ttl: Duration::from_secs(10),
            client_ca_file: None,
            request_header: RequestHeaderFlags::default(),
            always_allow_paths: AllowPaths::default(),
            authorized_ttl: Duration::from_secs(10),
            unauthorized_ttl: Duration::from_secs(10),
            user_agent: "admin-pprof-budget".into(),
        })
        .await
        .unwrap();
        let granted = env
            .token_for_service_account("default", "profiler")
            .unwrap();
        Cluster {
            env,
            auth: Arc::new(auth),
            granted,
            pair: SelfSignedPair::generate().unwrap(),
            dir,
        }
    }

    /// An HTTPS admin server with delegated auth serving `/debug/pprof` with `heap`, until the
    /// token is cancelled.
    fn serve(&self, heap: Arc<StandIn>) -> Admin {
        let certificates =
            Certificates::from_pem(self.pair.cert_pem.as_bytes(), self.pair.key_pem.as_bytes())
                .unwrap();
        let tls = Tls::new(certificates, &TlsSettings::default()).unwrap();
        let server = AdminServer::new(
            "127.0.0.1:0".parse().unwrap(),
            HealthChecks::new(),
            HealthChecks::new(),
            HealthChecks::new(),
            Arc::default(),
        )
        .unwrap()
        .with_tls(tls)
        .with_auth(self.auth.clone())
        .with_profiling(Profiling {
            enabled: true,
            heap: Some(heap),
        });
        let (addr, stop) = (server.local_addr(), CancellationToken::new());
        tokio::spawn(server.serve(stop.clone()));
        Admin {
            addr,
            stop,
            connector: connector(&self.pair),
            token: self.granted.clone(),
        }
    }
}

/// A client trusting the CA that signed `pair`.
fn connector(pair: &SelfSignedPair) -> TlsConnector {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(chain[1].clone()).unwrap();
    let config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

struct Admin {
    addr: SocketAddr,
    stop: CancellationToken,
    connector: TlsConnector,
    /// The granted caller's token.
    token: String,
}

struct Reply {
    status: u16,
    body: Vec<u8>,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl Admin {
    /// GET `path` as the granted caller.
    fn get(&self, path: &str) -> impl Future<Output = Reply> + Send + 'static {
        self.get_as(path, Some(&self.token))
    }

    /// GET `path` over a new HTTPS connection, with `token` as bearer if given.
    fn get_as(
        &self,
        path: &str,
        token: Option<&str>,
    ) -> impl Future<Output = Reply> + Send + 'static {
        let (addr, connector) = (self.addr, self.connector.clone());
        let mut request = http::Request::get(path).header("host", "localhost");
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let request = request.body(Empty::<Bytes>::new()).unwrap();
        async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let name = ServerName::try_from("localhost").unwrap();
            let tls = connector.connect(name, tcp).await.unwrap();
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .unwrap();
            // The connection is driven here, not in a task of its own, so that dropping this
            // future hangs up; it ends when the exchange drops `sender`.
            let exchange = async move {
                let response = sender.send_request(request).await.unwrap();
                let status = response.status().as_u16();
                let body = response.into_body().collect().await.unwrap().to_bytes();
                Reply {
                    status,
                    body: body.to_vec(),
                }
            };
            let (reply, _) = tokio::join!(exchange, connection);
            reply
        }
    }
}

/// Waits until `done` holds.
async fn until(done: impl Fn() -> bool) {
    tokio::time::timeout(DEADLINE, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("condition never held");
}

#[inline(never)]
fn spin(until: Instant) -> u64 {
    let mut x = 0u64;
    while Instant::now() < until {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
    }
    x
}

fn mb(bytes: usize) -> String {
    format!("{:.1} MB", bytes as f64 / f64::from(1 << 20))
}

/// One test: the budget and the sampler are process-wide, so these steps must not overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_run_one_of_each_kind_within_the_bound() {
    let cluster = Cluster::start().await;
    // Fits beside a CPU profile and the symbol tables they share exactly.
    let fits = StandIn::new(PROFILING_MEMORY_BOUND - SYMBOL_TABLE_BYTES - CPU_PROFILE_BYTES);
    let admin = cluster.serve(fits.clone());

    // Refused callers start nothing: anonymous and ungranted are 403, an unknown token 401.
    let anonymous = admin.get_as("/debug/pprof/profile?seconds=1", None).await;
    assert_eq!(anonymous.status, 403, "{}", anonymous.text());
    assert!(
        anonymous
            .text()
            .contains(r#"User \"system:anonymous\" cannot get path \"/debug/pprof/profile\""#),
        "{}",
        anonymous.text()
    );
    let nobody = cluster
        .env
        .token_for_service_account("default", "nobody")
        .unwrap();
    let ungranted = admin.get_as("/debug/pprof/heap", Some(&nobody)).await;
    assert_eq!(ungranted.status, 403, "{}", ungranted.text());
    assert!(
        ungranted
            .text()
            .contains("system:serviceaccount:default:nobody"),
        "{}",
        ungranted.text()
    );
    let unknown = admin.get_as("/debug/pprof/heap", Some("not-a-token")).await;
    assert_eq!(unknown.status, 401, "{}", unknown.text());
    assert_eq!(
        fits.started.load(Ordering::SeqCst),
        0,
        "no heap profile ran"
    );

    // A CPU profile samples this process (a thread spinning in `spin`) and symbolises it.
    let spinner = std::thread::spawn(|| spin(Instant::now() + Duration::from_secs(3)));
    let cpu = admin.get("/debug/pprof/profile?seconds=2").await;
    spinner.join().unwrap();
    assert_eq!(cpu.status, 200, "{}", cpu.text());
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(cpu.body.as_slice())
        .read_to_end(&mut raw)
        .unwrap();
    let profile = Profile::decode(raw.as_slice()).unwrap();
    assert!(!profile.sample.is_empty(), "no sample in 2 s of spinning");
    assert!(
        // The symbol table names it by its path, the line tables by its name.
        profile
            .string_table
            .iter()
            .any(|s| s == "spin" || s.ends_with("::spin")),
        "the spinning function is named: {:?}",
        &profile.string_table[..profile.string_table.len().min(40)]
    );

    // A heap profile while a CPU profile runs: together they fit. A second of either kind is a
    // 503 while the first runs.
    let heap = tokio::spawn(admin.get("/debug/pprof/heap"));
    until(|| fits.started.load(Ordering::SeqCst) == 1).await;
    let second = admin.get("/debug/pprof/heap").await;
    assert_eq!(
        (second.status, second.text().as_str()),
        (
            503,
            "a heap profile is already being taken; retry when it is done\n"
        )
    );
    let long = || admin.get("/debug/pprof/profile?seconds=3");
    let mut cpu = tokio::spawn(long());
    let second = loop {
        let second = admin.get("/debug/pprof/profile?seconds=1").await;
        if second.status != 200 {
            break second;
        }
        // This probe got in first and the 3 s profile was the refused one: ask for it again.
        if cpu.is_finished() {
            cpu = tokio::spawn(long());
        }
    };
    assert_eq!(
        (second.status, second.text().as_str()),
        (
            503,
            "a CPU profile is already being taken; retry when it is done\n"
        )
    );
    let cpu = tokio::time::timeout(DEADLINE, cpu).await.unwrap().unwrap();
    assert_eq!(cpu.status, 200, "{}", cpu.text());
    fits.open.store(true, Ordering::SeqCst);
    let heap = tokio::time::timeout(DEADLINE, heap).await.unwrap().unwrap();
    assert_eq!((heap.status, heap.text().as_str()), (200, "heap"));
    admin.stop.cancel();

    // A heap profile one byte larger does not fit beside a CPU profile: the later one is a 503.
    let large = StandIn::new(PROFILING_MEMORY_BOUND - SYMBOL_TABLE_BYTES - CPU_PROFILE_BYTES + 1);
    let admin = cluster.serve(large.clone());
    let heap = tokio::spawn(admin.get("/debug/pprof/heap"));
    until(|| large.started.load(Ordering::SeqCst) == 1).await;
    let refused = admin.get("/debug/pprof/profile?seconds=1").await;
    let expected = format!(
        "a CPU profile takes up to {} and the profiles running hold up to {} of the {} profiling may use; retry when they are done\n",
        mb(CPU_PROFILE_BYTES),
        mb(PROFILING_MEMORY_BOUND - CPU_PROFILE_BYTES + 1),
        mb(PROFILING_MEMORY_BOUND),
    );
    assert_eq!((refused.status, refused.text()), (503, expected));
    large.open.store(true, Ordering::SeqCst);
    assert_eq!(heap.await.unwrap().status, 200);
    let alone = admin.get("/debug/pprof/profile?seconds=1").await;
    assert_eq!(
        alone.status,
        200,
        "fits once the heap profile is done: {}",
        alone.text()
    );

    // A caller that hangs up ends its profile and gives its reservation back at once, not after
    // the 300 s it asked for.
    let asked = Instant::now();
    let long = || admin.get("/debug/pprof/profile?seconds=300");
    let mut abandoned = tokio::spawn(long());
    let heap = loop {
        let heap = admin.get("/debug/pprof/heap").await;
        if heap.status == 503 {
            break heap;
        }
        // The heap profile got in first and the CPU profile was refused: ask for it again.
        if abandoned.is_finished() {
            abandoned = tokio::spawn(long());
        }
        assert!(asked.elapsed() < DEADLINE, "{}", heap.text());
    };
    assert!(
        heap.text().contains("a heap profile takes up to"),
        "{}",
        heap.text()
    );
    abandoned.abort();
    let fits_again = tokio::time::timeout(DEADLINE, async {
        loop {
            let heap = admin.get("/debug/pprof/heap").await;
            if heap.status == 200 {
                break heap;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the hung-up CPU profile still holds its reservation");
    assert_eq!(fits_again.text(), "heap");
    assert!(asked.elapsed() < DEADLINE);
    admin.stop.cancel();

    // A heap profiler that needs more than the bound with the symbol tables is always refused.
    let admin = cluster.serve(StandIn::new(
        PROFILING_MEMORY_BOUND - SYMBOL_TABLE_BYTES + 1,
    ));
    let never = admin.get("/debug/pprof/heap").await;
    let expected = format!(
        "a heap profile takes up to {} and the profiles running hold up to 0.0 MB of the {} profiling may use; retry when they are done\n",
        mb(PROFILING_MEMORY_BOUND + 1),
        mb(PROFILING_MEMORY_BOUND),
    );
    assert_eq!((never.status, never.text()), (503, expected));
    admin.stop.cancel();
    let _ = std::fs::remove_dir_all(&cluster.dir);
}
