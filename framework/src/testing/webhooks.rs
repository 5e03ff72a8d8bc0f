//! [`WebhookInstall`]: an embedder's webhooks installed into kube-testenv, as envtest's
//! `WebhookInstallOptions` installs them into a real kube-apiserver. It reads the team's
//! manifests (webhook configurations and CRDs, the same files a cluster gets), points every
//! `clientConfig` (and every CRD's conversion client config) at a webhook server in the test
//! process, trusted through a CA made for the test, applies them, and serves the registered
//! webhooks there, with their informers on one factory the test can read. A webhook test then
//! reads like a controller test:
//!
//! ```ignore
//! let env = TestEnv::start().await?;
//! let hooks = WebhookInstall::from_manifests(&["docs/deploy/addresspool-webhooks.yaml"])
//!     .webhooks(address_pool::webhooks())
//!     .start(&env)
//!     .await?;
//! ```
//!
//! CRDs are applied first and awaited until Established, then the webhooks are built and their
//! informers synced, then the webhook configurations are applied, so the first write a test
//! makes is reviewed by a webhook that sees the cache.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use kube::api::{DynamicObject, PostParams};
use kube_testenv::TestEnv;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::certs::{ClientTarget, ManagedKind};
use crate::informer::SharedInformerFactory;
use crate::serving::{Certificates, Server, SocketSharing, Tls, TlsSettings};
use crate::webhook::{
    DEFAULT_HANDLER_TIMEOUT, WebhookContext, WebhookMetrics, WebhookServer, Webhooks, layers,
};

/// How long a CRD may take to become Established, and the webhooks' informers to sync.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the webhooks could not be installed; each names the file, object or webhook at fault.
#[derive(Debug, thiserror::Error)]
pub enum WebhookInstallError {
    /// A manifest could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A manifest is not YAML, or one of its documents is not an object this installs.
    #[error("{path}: {message}")]
    Manifest {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A configuration calls a path no registered webhook serves.
    #[error(
        "{object} calls {path}, which no registered webhook serves (served: {served}): register the webhook or fix the manifest"
    )]
    NotServed {
        /// `Kind/name`.
        object: String,
        /// The path it calls.
        path: String,
        /// The paths served.
        served: String,
    },
    /// The webhook map, a webhook's initializer, the certificates or the server failed.
    #[error("{0}")]
    Webhooks(String),
    /// kube-testenv refused an object.
    #[error("cannot apply {object}: {source}")]
    Apply {
        /// `Kind/name`.
        object: String,
        /// The server's answer.
        source: kube::Error,
    },
    /// A CRD never became Established, or the webhooks' informers never synced.
    #[error("{0}")]
    NotReady(String),
}

/// The manifests and webhooks to install; see the module docs.
pub struct WebhookInstall<C = ()> {
    manifests: Vec<PathBuf>,
    webhooks: Webhooks<C>,
    extra: Arc<C>,
    handler_timeout: Duration,
}

impl WebhookInstall<()> {
    /// Installs the webhook configurations and CRDs in `paths` (multi-document YAML).
    pub fn from_manifests<P: AsRef<Path>>(paths: &[P]) -> Self {
        WebhookInstall {
            manifests: paths.iter().map(|p| p.as_ref().to_path_buf()).collect(),
            webhooks: Webhooks::new(),
            extra: Arc::new(()),
            handler_timeout: DEFAULT_HANDLER_TIMEOUT,
        }
    }

    /// The embedder's context the webhooks' initializers get (`WebhookContext::extra`); give it
    /// before [`Self::webhooks`].
    pub fn context<D>(self, extra: D) -> WebhookInstall<D> {
        WebhookInstall {
            manifests: self.manifests,
            webhooks: Webhooks::default(),
            extra: Arc::new(extra),
            handler_timeout: self.handler_timeout,
        }
    }
}

/// One manifest document to apply.
struct Document {
    kind: ManagedKind,
    object: Value,
}

impl Document {
    fn describe(&self) -> String {
        let kind = self.object["kind"].as_str().unwrap_or_default();
        let name = self.object["metadata"]["name"].as_str().unwrap_or_default();
        format!("{kind}/{name}")
    }
}

impl<C: Send + Sync + 'static> WebhookInstall<C> {
    /// Serves every webhook of `webhooks` (the map the binary registers).
    pub fn webhooks(mut self, webhooks: Webhooks<C>) -> Self {
        self.webhooks = self.webhooks.merge(webhooks);
        self
    }

    /// The longest a review may take (10 s unless set).
    pub fn handler_timeout(mut self, timeout: Duration) -> Self {
        self.handler_timeout = timeout;
        self
    }

    /// Starts the webhook server on loopback, points the manifests at it and applies them.
    pub async fn start(self, env: &TestEnv) -> Result<InstalledWebhooks, WebhookInstallError> {
        let failed = |e: &dyn std::fmt::Display| WebhookInstallError::Webhooks(e.to_string());
        self.webhooks.check().map_err(|e| failed(&e))?;
        let mut documents = Vec::new();
        for path in &self.manifests {
            documents.extend(read_manifest(path)?);
        }
        let served: Vec<&str> = self.webhooks.iter().map(|w| w.path()).collect();
        for doc in &mut documents {
            for config in doc.kind.client_configs(&mut doc.object) {
                let path = ClientTarget::path_in(config).unwrap_or_else(|| "/".to_string());
                if !served.contains(&path.as_str()) {
                    return Err(WebhookInstallError::NotServed {
                        object: doc.describe(),
                        path,
                        served: match served.is_empty() {
                            true => "none".to_string(),
                            false => served.join(", "),
                        },
                    });
                }
            }
        }

        let ca = crate::certs::new_ca("webhook-install-ca", 1).map_err(|e| failed(&e))?;
        let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        let serving = crate::certs::issue(&ca, &names, 1).map_err(|e| failed(&e))?;
        let certificates =
            Certificates::from_pem(serving.cert_pem.as_bytes(), serving.key_pem.as_bytes())
                .map_err(|e| failed(&e))?;
        let tls = Tls::new(certificates, &TlsSettings::default()).map_err(|e| failed(&e))?;
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let bound = Server::bind(loopback, SocketSharing::default())
            .map_err(|e| failed(&e))?
            .with_tls(tls);
        let url = format!("https://{}", bound.local_addr());
        let target = ClientTarget::Url(url.clone());
        let bundle = base64::engine::general_purpose::STANDARD.encode(&ca.cert_pem);
        for doc in &mut documents {
            for config in doc.kind.client_configs(&mut doc.object) {
                target.point(config);
                config["caBundle"] = Value::String(bundle.clone());
            }
        }

        let client = env.client();
        let (crds, configurations): (Vec<_>, Vec<_>) = documents
            .into_iter()
            .partition(|d| d.kind == ManagedKind::CustomResourceDefinition);
        for crd in &crds {
            apply(&client, crd).await?;
        }
        for crd in &crds {
            established(&client, crd).await?;
        }

        let stop = CancellationToken::new();
        let factory = SharedInformerFactory::new(client.clone());
        let metrics = WebhookMetrics::new(&mut prometheus_client::registry::Registry::default());
        let mut server = WebhookServer::new();
        for webhook in self.webhooks.iter() {
            let ctx = WebhookContext {
                name: webhook.name().to_string(),
                path: webhook.path().to_string(),
                client: client.clone(),
                factory: factory.clone(),
                shutdown: stop.clone(),
                extra: self.extra.clone(),
            };
            let endpoint = webhook.build(ctx).await.map_err(|e| {
                failed(&format!("error starting webhook {:?}: {e}", webhook.name()))
            })?;
            let route = layers::standard(
                webhook.name(),
                webhook.path(),
                &metrics,
                self.handler_timeout,
                endpoint,
            );
            server = server
                .route(webhook.path(), route)
                .map_err(|path| failed(&format!("two webhooks are served at {path}")))?;
        }
        factory.start(stop.clone());
        factory
            .wait_for_sync(READY_TIMEOUT)
            .await
            .map_err(|e| WebhookInstallError::NotReady(e.to_string()))?;
        let serving = stop.clone();
        let task = tokio::spawn(async move {
            if let Err(error) = server.serve(bound, serving).await {
                tracing::warn!(%error, "the test's webhook server stopped");
            }
        });
        let installed = InstalledWebhooks {
            url,
            ca_pem: ca.cert_pem,
            factory,
            stop,
            task: Some(task),
        };
        for configuration in &configurations {
            apply(&client, configuration).await?;
        }
        Ok(installed)
    }
}

/// The webhook server of a [`WebhookInstall`], serving until [`Self::stop`] or drop.
pub struct InstalledWebhooks {
    url: String,
    ca_pem: String,
    factory: SharedInformerFactory,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl InstalledWebhooks {
    /// `https://127.0.0.1:PORT`, where every installed client config now points.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The CA (PEM) the installed configurations trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The informer factory the webhooks read, for a test to wait until the cache holds what it
    /// wrote before a write the webhook judges by it.
    pub fn informers(&self) -> &SharedInformerFactory {
        &self.factory
    }

    /// Stops serving once the reviews in flight are answered.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for InstalledWebhooks {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The documents of one manifest; anything but webhook configurations and CRDs is refused.
fn read_manifest(path: &Path) -> Result<Vec<Document>, WebhookInstallError> {
    let text = std::fs::read_to_string(path).map_err(|source| WebhookInstallError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let wrong = |message: String| WebhookInstallError::Manifest {
        path: path.to_path_buf(),
        message,
    };
    let values: Vec<Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| wrong(format!("not YAML: {e}")))?;
    values
        .into_iter()
        .filter(|v| !v.is_null())
        .enumerate()
        .map(|(i, object)| {
            let kind = object["kind"].as_str().unwrap_or_default();
            let kind = ManagedKind::of(kind).ok_or_else(|| {
                wrong(format!(
                    "document {} is a {kind:?}; WebhookInstall applies ValidatingWebhookConfigurations, MutatingWebhookConfigurations and CustomResourceDefinitions",
                    i + 1
                ))
            })?;
            Ok(Document { kind, object })
        })
        .collect()
}

/// Creates the object, or replaces the one of that name.
async fn apply(client: &kube::Client, doc: &Document) -> Result<(), WebhookInstallError> {
    let failed = |source| WebhookInstallError::Apply {
        object: doc.describe(),
        source,
    };
    let api = doc.kind.api(client);
    let mut object: DynamicObject =
        serde_json::from_value(doc.object.clone()).map_err(|e| WebhookInstallError::Manifest {
            path: PathBuf::from(doc.describe()),
            message: e.to_string(),
        })?;
    let pp = PostParams::default();
    match api.create(&pp, &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let name = object.metadata.name.clone().unwrap_or_default();
            let current = api.get(&name).await.map_err(failed)?;
            object.metadata.resource_version = current.metadata.resource_version;
            api.replace(&name, &pp, &object).await.map_err(failed)?;
            Ok(())
        }
        Err(e) => Err(failed(e)),
    }
}

/// Waits until the CRD's `Established` condition is true.
async fn established(client: &kube::Client, doc: &Document) -> Result<(), WebhookInstallError> {
    let api = doc.kind.api(client);
    let name = doc.object["metadata"]["name"].as_str().unwrap_or_default();
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let crd = api
            .get(name)
            .await
            .map_err(|source| WebhookInstallError::Apply {
                object: doc.describe(),
                source,
            })?;
        let conditions = crd.data["status"]["conditions"].as_array().cloned();
        let up = conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True");
        if up {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(WebhookInstallError::NotReady(format!(
                "{} is not Established after {READY_TIMEOUT:?}",
                doc.describe()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
