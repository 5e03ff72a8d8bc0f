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
//! Differences from upstream: the CA files and the ConfigMap are read once at start (upstream
//! watches them and reloads), and `--requestheader-*` names are matched as given (upstream also
//! warns when `X-Remote-User` is missing from the list).

mod authn;
mod authz;
mod cache;
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
use tokio_rustls::rustls::pki_types::CertificateDer;

pub use authz::AllowPaths;
pub use user::UserInfo;

use authn::{Authenticator, RequestHeaderConfig};
use authz::Authorizer;
use webhook::{AccessReviewer, Decision, TokenReviewer};

use super::x509::CaBundle;

/// Why delegated auth could not be set up; the process does not start.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    /// A delegated kubeconfig could not be loaded.
    #[error(
        "failed to get delegated {purpose} kubeconfig: {message} (check --{purpose}-kubeconfig)"
    )]
    Kubeconfig {
        /// `authentication` or `authorization`.
        purpose: String,
        /// What went wrong.
        message: String,
    },
    /// A CA file could not be read or parsed.
    #[error("unable to load {flag} {path}: {message}")]
    CaFile {
        /// The flag naming the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The ConfigMap lookup failed and `--authentication-tolerate-lookup-failure` is off.
    #[error(
        "unable to load configmap based request-header-client-ca-file: {0} (grant the extension-apiserver-authentication-reader Role in kube-system, or set --authentication-skip-lookup or --authentication-tolerate-lookup-failure)"
    )]
    Lookup(String),
}

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

/// The client certificate chain a TLS connection presented, attached to each of its requests.
#[derive(Clone, Debug, Default)]
pub(crate) struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// A ready authenticator and authorizer.
pub struct DelegatedAuth {
    authn: Authenticator,
    authz: Authorizer,
}

impl std::fmt::Debug for DelegatedAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedAuth")
            .field("tokens", &self.authn.tokens.is_some())
            .field("client_ca", &self.authn.client_ca.is_some())
            .field("request_header", &self.authn.request_header.is_some())
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
    let pem = std::fs::read(path).map_err(|e| failed(e.to_string()))?;
    match CaBundle::from_pem(&pem).map_err(failed)? {
        Some(ca) => Ok(Some(ca)),
        None => Err(failed("no PEM CERTIFICATE block".to_string())),
    }
}

impl DelegatedAuth {
    /// Builds the clients, reads the CA files and looks up what is missing, as upstream's
    /// `ApplyTo` does at start.
    pub async fn build(cfg: &DelegatedAuthConfig) -> Result<Self, AuthSetupError> {
        let client = lookup::delegated_client(
            cfg.authentication_kubeconfig.as_deref(),
            "authentication",
            &cfg.user_agent,
        )
        .await?;
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
        match (&client, want_ca || want_rh) {
            (_, false) => {}
            (None, true) => {
                let cm = format!(
                    "configmap/{} in {}",
                    lookup::CONFIGMAP_NAME,
                    lookup::CONFIGMAP_NAMESPACE
                );
                if want_ca {
                    tracing::warn!(
                        "No authentication-kubeconfig provided in order to lookup client-ca-file in {cm}, so client certificate authentication won't work."
                    );
                }
                if want_rh {
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
                            Err(e) => tolerate(cfg, e)?,
                        };
                    }
                }
                Err(e) if want_rh => request_header = tolerate(cfg, e.to_string())?,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the client CA from configmap/{}", lookup::CONFIGMAP_NAME)
                }
            },
        }
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
                request_header,
                client_ca,
                tokens: client.map(|c| TokenReviewer::new(c, cfg.token_cache_ttl)),
            },
            authz: Authorizer {
                always_allow: cfg.always_allow_paths.clone(),
                reviews: authz_client
                    .map(|c| AccessReviewer::new(c, cfg.authorized_ttl, cfg.unauthorized_ttl)),
            },
        })
    }

    /// Whether the TLS handshake should ask for a client certificate.
    pub fn wants_client_certificates(&self) -> bool {
        self.authn.client_ca.is_some()
            || self
                .authn
                .request_header
                .as_ref()
                .is_some_and(|rh| rh.ca.is_some())
    }
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
    let certs = req
        .extensions()
        .get::<PeerCertificates>()
        .map(|p| p.0.clone())
        .unwrap_or_default();
    let user = match auth.authn.authenticate(req.headers_mut(), &certs).await {
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
