//! kube-testenv: an embedded Kubernetes API server for tests, examples and no-cluster dev runs.
//!
//! It serves the real wire protocol over HTTP on loopback, so a real [`kube::Client`], kube-runtime
//! watchers and `kubectl` talk to it exactly as they talk to kube-apiserver: JSON objects, one
//! global resourceVersion, `Status` errors, chunked watches with bookmarks and 410s, patches,
//! status subresources, finalizers, CustomResourceDefinitions and their custom resources, and the
//! objects and defaults a real server adds on its own.
//! Tests additionally get a request log and fault injection.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kube_testenv::Error> {
//! let env = kube_testenv::TestEnv::start().await?;
//! let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(env.client());
//! # let _ = nodes; Ok(()) }
//! ```

mod admission;
mod api;
mod auth;
mod crd;
mod fields;
mod handlers;
mod http;
mod patch;
mod storage;
// Used by the admission chain and CRD conversion (issue 33), which land next.
#[allow(dead_code, unused_imports)]
mod webhook_client;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

pub use crd::fixture::CrdRules;
pub use http::faults::Faults;
pub use http::shared::RequestRecord;
pub use http::watch_list::WatchListSupport;

use api::cluster::AdmissionConfig;
use http::shared::Shared;
use http::{router, server, watch};
use storage::store::{self, Store};

/// Why the server could not start or a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listening socket could not be bound (port in use, no loopback).
    #[error("binding 127.0.0.1:{port}: {source}")]
    Bind {
        /// Requested port (0 = random).
        port: u16,
        /// The OS error.
        source: std::io::Error,
    },
    /// `service_cluster_ip_range` is not an IPv4 CIDR between /8 and /30.
    #[error("invalid service cluster IP range {0:?}: want an IPv4 CIDR like 10.96.0.0/12")]
    ServiceRange(String),
    /// The node port range is empty.
    #[error("invalid node port range {0}-{1}")]
    NodePortRange(u16, u16),
    /// The CA or a certificate for HTTPS could not be made.
    #[error("setting up HTTPS: {0}")]
    Tls(String),
    /// A client certificate was asked of a server started without [`Builder::https`].
    #[error("client certificates need HTTPS: start the server with Builder::https(true)")]
    NoHttps,
    /// A ServiceAccount token could not be minted (e.g. its namespace does not exist).
    #[error("minting a token for ServiceAccount {namespace}/{name}: {message}")]
    ServiceAccountToken {
        /// Namespace of the ServiceAccount.
        namespace: String,
        /// Name of the ServiceAccount.
        name: String,
        /// The API server's refusal.
        message: String,
    },
}

/// Options for [`TestEnv`]; start with [`TestEnv::builder`].
#[derive(Debug, Clone)]
pub struct Builder {
    port: u16,
    history_window: usize,
    history_bytes: usize,
    service_range: String,
    node_ports: RangeInclusive<u16>,
    bookmark_interval: Duration,
    watch_buffer: usize,
    watch_buffer_bytes: usize,
    watch_list: WatchListSupport,
    request_timeout: Duration,
    static_tokens: HashMap<String, auth::UserInfo>,
    authorization: bool,
    https: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            port: 0,
            history_window: 10_000,
            history_bytes: store::DEFAULT_HISTORY_BYTES,
            service_range: "10.96.0.0/12".into(),
            node_ports: 30000..=32767,
            bookmark_interval: Duration::from_secs(60),
            watch_buffer: 10_000,
            watch_buffer_bytes: store::DEFAULT_WATCH_BUFFER_BYTES,
            watch_list: WatchListSupport::Served,
            request_timeout: router::DEFAULT_REQUEST_TIMEOUT,
            static_tokens: HashMap::new(),
            authorization: false,
            https: false,
        }
    }
}

impl Builder {
    /// Listen on this port of 127.0.0.1 (default: a random free port).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// How many events (of all types together) a watch can resume across; older resourceVersions
    /// get 410 Gone, like etcd compaction on a real cluster (default 10,000).
    pub fn history_window(mut self, events: usize) -> Self {
        self.history_window = events;
        self
    }

    /// How many bytes of events (the JSON of each changed object and its previous state) a
    /// watch can resume across; older events are dropped, and a watch from before them gets
    /// 410 Gone, as with [`Builder::history_window`] (default 64 MiB).
    pub fn history_bytes(mut self, bytes: usize) -> Self {
        self.history_bytes = bytes;
        self
    }

    /// ClusterIP range for Services (default `10.96.0.0/12`, the kubeadm default).
    pub fn service_cluster_ip_range(mut self, cidr: &str) -> Self {
        self.service_range = cidr.to_string();
        self
    }

    /// NodePort range (default 30000-32767).
    pub fn node_port_range(mut self, range: RangeInclusive<u16>) -> Self {
        self.node_ports = range;
        self
    }

    /// How often a watch with `allowWatchBookmarks` gets a BOOKMARK (default 60 s, about what
    /// kube-apiserver does); shorten it to test bookmark handling under a paused clock.
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.bookmark_interval = every;
        self
    }

    /// Events a watch may fall behind before the server closes it as too slow (default 10,000).
    pub fn watch_buffer(mut self, events: usize) -> Self {
        self.watch_buffer = events;
        self
    }

    /// How long a request may take before it is answered `504 Timeout`, as kube-apiserver's
    /// `--request-timeout` (default 60 s); watches are exempt, as upstream's long-running
    /// requests. The request's work runs on to its end.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Bytes of unsent watch frames a watch may fall behind before the server closes it as too
    /// slow (default 16 MiB). The events are shared by every watch, so this also bounds what all
    /// stalled watches together keep alive.
    pub fn watch_buffer_bytes(mut self, bytes: usize) -> Self {
        self.watch_buffer_bytes = bytes;
        self
    }

    /// How streaming lists (`sendInitialEvents=true`) are answered (default: served, as current
    /// kube-apiserver); [`WatchListSupport::V1_23`] answers as a v1.23 server, to test a
    /// client's fallback to LIST + WATCH.
    pub fn watch_list(mut self, support: WatchListSupport) -> Self {
        self.watch_list = support;
        self
    }

    /// Binds, seeds the objects a fresh cluster has, and starts serving.
    pub async fn start(self) -> Result<TestEnv, Error> {
        let service_net = AdmissionConfig::parse_cidr(&self.service_range)
            .ok_or_else(|| Error::ServiceRange(self.service_range.clone()))?;
        if self.node_ports.is_empty() {
            return Err(Error::NodePortRange(
                *self.node_ports.start(),
                *self.node_ports.end(),
            ));
        }
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .map_err(|source| Error::Bind {
                port: self.port,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            port: self.port,
            source,
        })?;
        let store = Arc::new(
            Store::new(self.history_window, self.watch_buffer)
                .history_bytes(self.history_bytes)
                .watch_buffer_bytes(self.watch_buffer_bytes),
        );
        let admission = AdmissionConfig {
            service_net,
            node_ports: self.node_ports.clone(),
        };
        let tls = match self.https {
            true => Some(Arc::new(
                auth::Tls::new().map_err(|e| Error::Tls(e.to_string()))?,
            )),
            false => None,
        };
        seed(&store, &admission, addr);
        if let Some(tls) = &tls {
            store.with(|s| auth::publish_client_ca(s, &admission, &tls.ca_pem));
        }
        let admin_token = auth::random_token();
        let mut tokens = self.static_tokens.clone();
        tokens.insert(
            admin_token.clone(),
            auth::UserInfo::authenticated(ADMIN_USER, "", &["system:masters"]),
        );
        let shared = Arc::new(Shared {
            faults: Faults::new(store.clone()),
            store,
            log: Mutex::new(Vec::new()),
            admission,
            watch: watch::WatchConfig {
                bookmark_interval: self.bookmark_interval,
                list_support: self.watch_list,
            },
            address: addr.to_string(),
            auth: auth::Auth {
                tokens: auth::Tokens::new(tokens),
                enforce: self.authorization,
            },
            tls,
            request_timeout: self.request_timeout,
        });
        let (ctl, rx) = mpsc::channel(4);
        tokio::spawn(server::run(listener, shared.clone(), rx));
        tracing::info!(%addr, "kube-testenv serving");
        Ok(TestEnv {
            inner: Arc::new(Inner {
                addr,
                shared,
                ctl,
                admin_token,
            }),
        })
    }
}

/// What a fresh cluster has before anyone writes: the system namespaces and the `kubernetes`
/// Service, Endpoints and EndpointSlice in `default`.
fn seed(store: &Store, cfg: &AdmissionConfig, addr: SocketAddr) {
    let kubernetes_service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": cfg.kubernetes_ip(), "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": addr.port()}]}
    });
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": addr.ip().to_string()}], "ports": [{"name": "https", "port": addr.port(), "protocol": "TCP"}]}]
    });
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [addr.ip().to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": addr.port(), "protocol": "TCP"}]
    });
    let mut objects: Vec<(&str, &str, Option<&str>, serde_json::Value)> =
        ["default", "kube-system", "kube-public", "kube-node-lease"]
            .into_iter()
            .map(|ns| {
                (
                    "",
                    "namespaces",
                    None,
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                )
            })
            .collect();
    objects.push(("", "services", Some("default"), kubernetes_service));
    objects.push(("", "endpoints", Some("default"), endpoints));
    objects.push(("discovery.k8s.io", "endpointslices", Some("default"), slice));
    // Written as kube-apiserver writes them, so their managedFields name it.
    let seed = handlers::WriteOptions::by("kube-apiserver");
    store.with(|s| {
        for (group, plural, ns, obj) in objects {
            let Some(t) = handlers::Target::builtin(group, plural, ns) else {
                tracing::error!(plural, "seeding: type not served");
                continue;
            };
            if let Err(e) = handlers::create(s, cfg, &t, obj, &seed) {
                tracing::error!(error = ?e, plural, "seeding");
            }
        }
        auth::seed(s, cfg);
    });
}

struct Inner {
    addr: SocketAddr,
    shared: Arc<Shared>,
    ctl: mpsc::Sender<server::Control>,
    admin_token: String,
}

/// The user [`TestEnv::client`] authenticates as (kubeadm's admin user, in `system:masters`).
pub const ADMIN_USER: &str = "kubernetes-admin";

/// A running embedded API server. Clones share it; dropping the last clone stops it.
#[derive(Clone)]
pub struct TestEnv {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("addr", &self.inner.addr)
            .finish()
    }
}

impl TestEnv {
    /// Starts a server with default options on a random loopback port.
    pub async fn start() -> Result<TestEnv, Error> {
        Builder::default().start().await
    }

    /// Options: port, history window, Service ranges, bookmark interval.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// `http://127.0.0.1:PORT` (`https://` with [`Builder::https`]).
    pub fn url(&self) -> String {
        let scheme = match self.inner.shared.tls {
            Some(_) => "https",
            None => "http",
        };
        format!("{scheme}://{}", self.inner.addr)
    }

    /// The socket address served.
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// A kube config pointing at this server (default namespace `default`) that authenticates
    /// as [`ADMIN_USER`] (group `system:masters`, allowed everything).
    pub fn config(&self) -> kube::Config {
        self.config_with_token(&self.inner.admin_token)
    }

    /// A kube config pointing at this server that authenticates with bearer `token`.
    pub fn config_with_token(&self, token: &str) -> kube::Config {
        // `http://<ipv4>:<port>` always parses; the fallback only keeps this infallible.
        let uri: ::http::Uri = match self.url().parse() {
            Ok(u) => u,
            Err(_) => ::http::Uri::from_static("http://127.0.0.1"),
        };
        let mut config = kube::Config::new(uri);
        if let Some(tls) = &self.inner.shared.tls {
            config.root_cert = Some(vec![tls.ca_der.clone()]);
        }
        // AuthInfo's token is a secrecy::SecretString; going through its serde form spares this
        // crate a dependency on secrecy.
        if !token.is_empty()
            && let Ok(info) = serde_json::from_value(json!({ "token": token }))
        {
            config.auth_info = info;
        }
        config
    }

    /// A real `kube::Client` over HTTP to this server, as [`ADMIN_USER`].
    ///
    /// # Panics
    /// Never for a loopback HTTP config (kube only fails on TLS or proxy set-up, which this config
    /// does not have); a failure would be a kube bug and is reported by panicking.
    pub fn client(&self) -> kube::Client {
        self.client_with_token(&self.inner.admin_token)
    }

    /// Writes a kubeconfig that kubectl (and any client-go program) can use, as [`ADMIN_USER`].
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        let mut yaml = kubeconfig_yaml_with_token(&self.url(), &self.inner.admin_token);
        if let Some(tls) = &self.inner.shared.tls {
            let ca = format!(
                "    server: {}\n    certificate-authority-data: {}\n",
                self.url(),
                auth::base64(tls.ca_pem.as_bytes())
            );
            yaml = yaml.replace(&format!("    server: {}\n", self.url()), &ca);
        }
        std::fs::write(path, yaml)
    }

    /// Every request served so far, in arrival order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.inner.shared.log.lock().clone()
    }

    /// Forgets the request log (e.g. after test set-up).
    pub fn clear_requests(&self) {
        self.inner.shared.log.lock().clear();
    }

    /// The fault-injection handle.
    pub fn faults(&self) -> Faults {
        self.inner.shared.faults.clone()
    }

    /// The latest resourceVersion (for asserting on watch progress).
    pub fn resource_version(&self) -> u64 {
        self.inner.shared.store.with(|s| s.rv())
    }

    /// Number of open watch streams.
    pub fn open_watches(&self) -> usize {
        self.inner.shared.store.with(|s| s.watch_count())
    }

    /// Drops every connection and watch (as an apiserver restart does) and keeps the data.
    pub async fn restart(&self) {
        let (ack, done) = oneshot::channel();
        if self
            .inner
            .ctl
            .send(server::Control::Restart(ack))
            .await
            .is_ok()
        {
            let _ = done.await;
        }
    }

    /// Stops serving now, even if other clones of this handle exist.
    pub async fn shutdown(self) {
        let (ack, done) = oneshot::channel();
        if self
            .inner
            .ctl
            .send(server::Control::Shutdown(ack))
            .await
            .is_ok()
        {
            let _ = done.await;
        }
    }
}

/// A kubeconfig for `server` with one context named `testenv`, without credentials (the
/// server takes its requests as `system:anonymous`).
pub fn kubeconfig_yaml(server: &str) -> String {
    kubeconfig(server, "{}")
}

/// A kubeconfig for `server` with one context named `testenv` whose user sends bearer `token`.
pub fn kubeconfig_yaml_with_token(server: &str, token: &str) -> String {
    kubeconfig(server, &format!("{{token: {token}}}"))
}

fn kubeconfig(server: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testenv\n  cluster:\n    server: {server}\ncontexts:\n- name: testenv\n  context:\n    cluster: testenv\n    user: testenv\n    namespace: default\ncurrent-context: testenv\nusers:\n- name: testenv\n  user: {user}\npreferences: {{}}\n"
    )
}
