//! The controller client builder (k8s.io/controller-manager `pkg/clientbuilder`): a client per
//! controller, by client name, each with its own QPS/burst limiter and user agent.
//!
//! - [`ClientBuilder::simple`] (upstream `SimpleControllerClientBuilder`): every client uses the
//!   process's own credentials, with user agent `<binary>/<client name>`.
//! - [`ClientBuilder::service_accounts`] (upstream `DynamicControllerClientBuilder`, chosen by
//!   `--use-service-account-credentials`): each client authenticates as ServiceAccount
//!   `<namespace>/<client name>` (created if missing) with a TokenRequest token rotated before it
//!   expires (see `token.rs`), and none of the process's own credentials; user agent
//!   `<binary>/system:serviceaccount:<namespace>:<client name>`, as upstream.
//! - [`ClientBuilder::shared`]: one ready client for every name (tests, embedders that build
//!   their own client); no per-controller limiter.
//!
//! [`ClientBuilder::root_client`] always uses the process's own credentials: the shared informers
//! and other process-wide work use it, as upstream's root client builder.
//!
//! Every call to [`ClientBuilder::client`] builds a new client with a new limiter, as upstream's
//! `ClientOrDie`; clients of one ServiceAccount share its token.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::token::{
    BearerTokenLayer, ServiceAccountToken, get_or_create_service_account, service_account_username,
};
use super::{ClientError, ClientMetrics, build_layered};

/// Hands out one API client per controller; cheap to clone.
#[derive(Clone)]
pub struct ClientBuilder {
    inner: Arc<Inner>,
}

enum Inner {
    Shared(kube::Client),
    Built(Box<Built>),
}

struct Built {
    binary: String,
    /// The process's own configuration, credentials included.
    config: kube::Config,
    qps: f32,
    burst: u32,
    metrics: Option<ClientMetrics>,
    accounts: Option<ServiceAccounts>,
}

struct ServiceAccounts {
    root: kube::Client,
    namespace: String,
    tokens: Mutex<HashMap<String, Arc<ServiceAccountToken>>>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match &*self.inner {
            Inner::Shared(_) => "shared",
            Inner::Built(b) if b.accounts.is_none() => "simple",
            Inner::Built(_) => "service-accounts",
        };
        f.debug_struct("ClientBuilder")
            .field("mode", &mode)
            .finish()
    }
}

impl ClientBuilder {
    /// Clients with the credentials of `config`, user agent `<binary>/<name>`, each with its own
    /// `qps`/`burst` limiter (`qps <= 0` turns it off) and, when given, `rest_client_*` metrics.
    pub fn simple(
        config: kube::Config,
        binary: &str,
        qps: f32,
        burst: u32,
        metrics: Option<&ClientMetrics>,
    ) -> Self {
        Self::built(config, binary, qps, burst, metrics, None)
    }

    /// `--use-service-account-credentials`: clients authenticated as ServiceAccount
    /// `namespace/<name>`; `root` (the process's own client) creates the ServiceAccounts and
    /// requests their tokens. `config` gives the server and its CA; its credentials are used
    /// only by [`Self::root_client`].
    pub fn service_accounts(
        config: kube::Config,
        root: kube::Client,
        namespace: &str,
        binary: &str,
        qps: f32,
        burst: u32,
        metrics: Option<&ClientMetrics>,
    ) -> Self {
        let accounts = ServiceAccounts {
            root,
            namespace: namespace.to_string(),
            tokens: Mutex::new(HashMap::new()),
        };
        Self::built(config, binary, qps, burst, metrics, Some(accounts))
    }

    /// The same `client` for every name.
    pub fn shared(client: kube::Client) -> Self {
        ClientBuilder {
            inner: Arc::new(Inner::Shared(client)),
        }
    }

    fn built(
        config: kube::Config,
        binary: &str,
        qps: f32,
        burst: u32,
        metrics: Option<&ClientMetrics>,
        accounts: Option<ServiceAccounts>,
    ) -> Self {
        ClientBuilder {
            inner: Arc::new(Inner::Built(Box::new(Built {
                binary: binary.to_string(),
                config,
                qps,
                burst,
                metrics: metrics.cloned(),
                accounts,
            }))),
        }
    }

    /// Whether clients authenticate as per-controller ServiceAccounts.
    pub fn uses_service_accounts(&self) -> bool {
        matches!(&*self.inner, Inner::Built(b) if b.accounts.is_some())
    }

    /// The user name a client of `name` authenticates as with ServiceAccount credentials;
    /// `None` when clients use the process's own credentials.
    pub fn username(&self, name: &str) -> Option<String> {
        match &*self.inner {
            Inner::Built(b) => b
                .accounts
                .as_ref()
                .map(|a| service_account_username(&a.namespace, name)),
            Inner::Shared(_) => None,
        }
    }

    /// A new client with the process's own credentials and user agent `<binary>/<name>`, in
    /// every mode (upstream's root client builder): for process-wide work such as the shared
    /// informers.
    pub fn root_client(&self, name: &str) -> Result<kube::Client, ClientError> {
        match &*self.inner {
            Inner::Shared(client) => Ok(client.clone()),
            Inner::Built(b) => {
                let agent = format!("{}/{name}", b.binary);
                build_layered(
                    b.config.clone(),
                    b.qps,
                    b.burst,
                    &agent,
                    b.metrics.as_ref(),
                    None,
                )
            }
        }
    }

    /// A new client for the controller whose client name is `name`. With ServiceAccount
    /// credentials this gets (or creates) the ServiceAccount first, as upstream's `Config`.
    pub async fn client(&self, name: &str) -> Result<kube::Client, ClientError> {
        let b = match &*self.inner {
            Inner::Shared(client) => return Ok(client.clone()),
            Inner::Built(b) => b,
        };
        let Some(accounts) = &b.accounts else {
            return self.root_client(name);
        };
        get_or_create_service_account(&accounts.root, &accounts.namespace, name)
            .await
            .map_err(|source| ClientError::ServiceAccount {
                name: format!("{}/{name}", accounts.namespace),
                source,
            })?;
        let token = accounts
            .tokens
            .lock()
            .entry(name.to_string())
            .or_insert_with(|| {
                Arc::new(ServiceAccountToken::new(
                    accounts.root.clone(),
                    &accounts.namespace,
                    name,
                ))
            })
            .clone();
        let agent = format!(
            "{}/{}",
            b.binary,
            service_account_username(&accounts.namespace, name)
        );
        // Upstream's AnonymousClientConfig: the server and its CA, none of our credentials.
        let mut config = b.config.clone();
        config.auth_info = kube::config::AuthInfo::default();
        build_layered(
            config,
            b.qps,
            b.burst,
            &agent,
            b.metrics.as_ref(),
            Some(BearerTokenLayer::new(token)),
        )
    }
}
