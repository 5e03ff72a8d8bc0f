//! Delegated authentication and authorization for the admin port, as upstream's secure serving
//! wires `DelegatingAuthenticationOptions` and `DelegatingAuthorizationOptions`: every request is
//! authenticated (anonymous allowed), then authorized, before it reaches a handler.
//!
//! - `authn`: front-proxy headers, client certificates, bearer tokens (TokenReview).
//! - `authz`: `system:masters`, always-allowed paths, SubjectAccessReview.
//! - `webhook`: the two reviews and their caches; `cache`: the TTL cache.
//! - `lookup`: the delegated clients and the `extension-apiserver-authentication` ConfigMap.
//! - `responses`: upstream's 401/403/500 bodies.
//!
//! The CA files and the ConfigMap are read at start and again every minute ([`keep_fresh`]), as
//! upstream's dynamic CA providers resync; a failed reload keeps the previous trust.
//!
//! Differences from upstream: a reload is a poll, not also a file or ConfigMap watch, so a new
//! CA takes effect within a minute rather than at once; whether the handshake asks for client
//! certificates is decided at start.

mod authn;
mod authz;
mod cache;
mod error;
mod lookup;
mod responses;
mod user;
mod webhook;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

pub use error::AuthSetupError;
pub use user::UserInfo;

use authn::{Authenticator, CertTrust, RequestHeaderConfig};
use authz::Authorizer;
use parking_lot::RwLock;
use webhook::{AccessReviewer, Decision, TokenReviewer};

use crate::options::AllowPaths;
use crate::serving::PeerCertificates;
use crate::serving::x509::CaBundle;

/// The front-proxy flags (`--requestheader-*`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHeaderFlags {
    /// `--requestheader-client-ca-file`.
    pub client_ca_file: Option<PathBuf>,
    /// `--requestheader-allowed-names`.
    pub allowed_names: Vec<String>,
    /// `--requestheader-username-headers`.
    pub username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub uid_headers: Vec<String>,
    /// `--requestheader-group-headers`.
    pub group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    pub extra_prefixes: Vec<String>,
}

/// Everything delegated auth is built from, usually the `--authentication-*`,
/// `--authorization-*`, `--client-ca-file` and `--requestheader-*` flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelegatedAuthConfig {
    /// Where TokenReviews and the ConfigMap lookup go; `None`: in-cluster, else none.
    pub authentication_kubeconfig: Option<PathBuf>,
    /// Where SubjectAccessReviews go; `None`: in-cluster, else none.
    pub authorization_kubeconfig: Option<PathBuf>,
    /// `--authentication-skip-lookup`.
    pub skip_lookup: bool,
    /// `--authentication-tolerate-lookup-failure`.
    pub tolerate_lookup_failure: bool,
    /// `--authentication-token-webhook-cache-ttl`.
    pub token_cache_ttl: Duration,
    /// `--client-ca-file`.
    pub client_ca_file: Option<PathBuf>,
    /// The front-proxy flags.
    pub request_header: RequestHeaderFlags,
    /// `--authorization-always-allow-paths`.
    pub always_allow_paths: AllowPaths,
    /// `--authorization-webhook-cache-authorized-ttl`.
    pub authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl`.
    pub unauthorized_ttl: Duration,
    /// User agent of the delegated clients.
    pub user_agent: String,
}

/// A ready authenticator and authorizer.
pub struct DelegatedAuth {
    authn: Authenticator,
    authz: Authorizer,
    /// What it was built from, for reloads.
    cfg: DelegatedAuthConfig,
    lookup_client: Option<kube::Client>,
}

impl std::fmt::Debug for DelegatedAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedAuth")
            .field("tokens", &self.authn.tokens.is_some())
            .field("certs", &self.authn.certs.read())
            .field("reviews", &self.authz.reviews.is_some())
            .finish()
    }
}

fn read_ca(flag: &'static str, path: &Path) -> Result<Option<CaBundle>, AuthSetupError> {
    let failed = |message: String| AuthSetupError::CaFile {
        flag,
        path: path.to_path_buf(),
        message,
    };
    let pem = crate::files::read_bounded(path).map_err(|e| failed(e.to_string()))?;
    match CaBundle::from_pem(&pem).map_err(failed)? {
        Some(ca) => Ok(Some(ca)),
        None => Err(failed("no PEM CERTIFICATE block".to_string())),
    }
}

impl DelegatedAuth {
    /// Builds the clients, reads the CA files and looks up what is missing, as upstream's
    /// `ApplyTo` does at start; a failure here stops the start.
    pub async fn build(cfg: &DelegatedAuthConfig) -> Result<Self, AuthSetupError> {
        let client = lookup::delegated_client(
            cfg.authentication_kubeconfig.as_deref(),
            "authentication",
            &cfg.user_agent,
        )
        .await?;
        let trust = load_trust(cfg, client.as_ref(), true).await?;
        let authz_client = lookup::delegated_client(
            cfg.authorization_kubeconfig.as_deref(),
            "authorization",
            &cfg.user_agent,
        )
        .await?;
        if authz_client.is_none() {
            tracing::warn!(
                "No authorization-kubeconfig provided, so SubjectAccessReview of authorization tokens won't work."
            );
        }
        Ok(DelegatedAuth {
            authn: Authenticator {
                certs: RwLock::new(Arc::new(trust)),
                tokens: client
                    .clone()
                    .map(|c| TokenReviewer::new(c, cfg.token_cache_ttl)),
            },
            authz: Authorizer {
                always_allow: cfg.always_allow_paths.clone(),
                reviews: authz_client
                    .map(|c| AccessReviewer::new(c, cfg.authorized_ttl, cfg.unauthorized_ttl)),
            },
            cfg: cfg.clone(),
            lookup_client: client,
        })
    }

    /// Whether the TLS handshake should ask for a client certificate. Decided at start: a CA
    /// that first appears on a reload is used only if one was known at start.
    pub fn wants_client_certificates(&self) -> bool {
        let trust = self.authn.certs.read();
        trust.client_ca.is_some()
            || trust
                .request_header
                .as_ref()
                .is_some_and(|rh| rh.ca.is_some())
    }

    /// Re-reads the CA files and the ConfigMap, as upstream's dynamic CA providers do; a
    /// failure keeps the previous trust and is logged.
    pub(crate) async fn reload(&self) {
        match load_trust(&self.cfg, self.lookup_client.as_ref(), false).await {
            Ok(trust) => *self.authn.certs.write() = Arc::new(trust),
            Err(error) => {
                tracing::warn!(%error, "cannot reload the client CA configuration; keeping the previous one")
            }
        }
    }
}

/// How often the CA files and the ConfigMap are re-read (upstream's dynamic providers resync
/// every minute).
pub(crate) const RELOAD_EVERY: Duration = Duration::from_secs(60);

/// Reloads `auth` every [`RELOAD_EVERY`] until it is dropped (the server stopped).
pub(crate) async fn keep_fresh(auth: std::sync::Weak<DelegatedAuth>) {
    loop {
        tokio::time::sleep(RELOAD_EVERY).await;
        let Some(auth) = auth.upgrade() else {
            return;
        };
        auth.reload().await;
    }
}

/// The client CA and the front-proxy configuration: flags first, the ConfigMap for what they
/// leave out (unless `--authentication-skip-lookup`). `first` is the start, which logs what
/// will not work and fails on a lookup error unless tolerated.
async fn load_trust(
    cfg: &DelegatedAuthConfig,
    client: Option<&kube::Client>,
    first: bool,
) -> Result<CertTrust, AuthSetupError> {
    let mut client_ca = match &cfg.client_ca_file {
        Some(path) => read_ca("--client-ca-file", path)?,
        None => None,
    };
    let rh = &cfg.request_header;
    let mut request_header = match &rh.client_ca_file {
        Some(path) => Some(RequestHeaderConfig {
            ca: read_ca("--requestheader-client-ca-file", path)?,
            allowed_names: rh.allowed_names.clone(),
            username_headers: rh.username_headers.clone(),
            uid_headers: rh.uid_headers.clone(),
            group_headers: rh.group_headers.clone(),
            extra_prefixes: rh.extra_prefixes.clone(),
        }),
        None => None,
    };
    let want_ca = cfg.client_ca_file.is_none() && !cfg.skip_lookup;
    let want_rh = rh.client_ca_file.is_none() && !cfg.skip_lookup;
    match (client, want_ca || want_rh) {
        (_, false) => {}
        (None, true) => {
            let cm = format!(
                "configmap/{} in {}",
                lookup::CONFIGMAP_NAME,
                lookup::CONFIGMAP_NAMESPACE
            );
            if first && want_ca {
                tracing::warn!(
                    "No authentication-kubeconfig provided in order to lookup client-ca-file in {cm}, so client certificate authentication won't work."
                );
            }
            if first && want_rh {
                tracing::warn!(
                    "No authentication-kubeconfig provided in order to lookup requestheader-client-ca-file in {cm}, so request-header client certificate authentication won't work."
                );
            }
        }
        (Some(client), true) => match lookup::read_configmap(client).await {
            Ok(data) => {
                let data = data.unwrap_or_default();
                if want_ca {
                    client_ca = lookup::client_ca(&data).map_err(AuthSetupError::Lookup)?;
                }
                if want_rh {
                    request_header = match lookup::request_header(&data) {
                        Ok(found) => found,
                        Err(e) if first => tolerate(cfg, e)?,
                        Err(e) => return Err(AuthSetupError::Lookup(e)),
                    };
                }
            }
            Err(e) if want_rh && first => request_header = tolerate(cfg, webhook::describe(&e))?,
            Err(e) if !first => return Err(AuthSetupError::Lookup(webhook::describe(&e))),
            Err(e) => {
                tracing::warn!(error = %webhook::describe(&e), "cannot read the client CA from configmap/{}", lookup::CONFIGMAP_NAME)
            }
        },
    }
    Ok(CertTrust {
        request_header,
        client_ca,
    })
}

fn tolerate(
    cfg: &DelegatedAuthConfig,
    error: String,
) -> Result<Option<RequestHeaderConfig>, AuthSetupError> {
    if !cfg.tolerate_lookup_failure {
        return Err(AuthSetupError::Lookup(error));
    }
    tracing::warn!("Error looking up in-cluster authentication configuration: {error}");
    tracing::warn!(
        "Continuing without authentication configuration. This may treat all requests as anonymous."
    );
    tracing::warn!(
        "To require authentication configuration lookup to succeed, set --authentication-tolerate-lookup-failure=false"
    );
    Ok(None)
}

/// The authentication and authorization filters, in upstream's order, as axum middleware.
pub(crate) async fn guard(
    State(auth): State<Arc<DelegatedAuth>>,
    mut req: Request,
    next: Next,
) -> Response {
    let certs = PeerCertificates::of(&req);
    let user = match auth
        .authn
        .authenticate(req.headers_mut(), certs.chain())
        .await
    {
        Ok(user) => user,
        Err(error) => {
            tracing::error!(%error, "Unable to authenticate the request");
            return responses::unauthorized(req.uri(), req.headers());
        }
    };
    let verb = req.method().as_str().to_ascii_lowercase();
    match auth.authz.authorize(&user, &verb, req.uri().path()).await {
        Ok(Decision::Allow) => next.run(req).await,
        Ok(Decision::Deny(reason) | Decision::NoOpinion(reason)) => {
            tracing::debug!(uri = %req.uri(), user = %user.name, %reason, "Forbidden");
            responses::forbidden(req.uri(), req.headers(), &user.name, &verb, &reason)
        }
        Err(error) => responses::internal_error(req.uri(), &error),
    }
}
