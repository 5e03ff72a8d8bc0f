//! ServiceAccount credentials for `--use-service-account-credentials`, as k8s.io/controller-manager's
//! `DynamicControllerClientBuilder`: the ServiceAccount is created if missing, its token comes
//! from the TokenRequest API (`serviceaccounts/token`, 3600 s), and is replaced once 80 % of its
//! lifetime has passed (20 % leeway; a lifetime under 10 min is taken as 10 min, in case of clock
//! skew). A request answered 401 drops the cached token, so the next one fetches a fresh token.
//! Fetching is retried 4 times (500 ms, doubling); when it still fails and a token is cached,
//! the old token is used and the failure logged, as client-go's caching token source does.
//!
//! The token is fetched on demand by the request that needs it (one fetch at a time per
//! ServiceAccount), with the root client, never with the ServiceAccount's own client.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderValue, Request, Response, StatusCode, header::AUTHORIZATION};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};
use tracing::{info, warn};

/// Lifetime asked of each token, as upstream.
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3600;
/// Share of a token's lifetime left when it is replaced, as upstream.
pub const TOKEN_LEEWAY_PERCENT: u32 = 20;
/// Shortest lifetime assumed for a token (upstream pins shorter answers to this).
const MIN_LIFETIME: Duration = Duration::from_secs(600);
/// Attempts per fetch and the first pause between them (doubling), as upstream.
const FETCH_ATTEMPTS: u32 = 4;
const FETCH_FIRST_DELAY: Duration = Duration::from_millis(500);

/// No token could be obtained for a ServiceAccount.
#[derive(Debug, thiserror::Error)]
#[error("failed to get token for {namespace}/{name}: {message}")]
pub struct TokenError {
    /// Namespace of the ServiceAccount.
    pub namespace: String,
    /// Name of the ServiceAccount (the controller's client name).
    pub name: String,
    /// The last failure.
    pub message: String,
}

/// `system:serviceaccount:<namespace>:<name>`, the user name the API server gives a token.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// Gets the ServiceAccount, creating it (and, tolerating failure, its namespace) if missing.
pub(crate) async fn get_or_create_service_account(
    root: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<ServiceAccount, kube::Error> {
    let api: Api<ServiceAccount> = Api::namespaced(root.clone(), namespace);
    match api.get(name).await {
        Ok(sa) => return Ok(sa),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e),
    }
    let namespaces: Api<Namespace> = Api::all(root.clone());
    if let Err(kube::Error::Api(s)) = namespaces.get(namespace).await
        && s.code == 404
    {
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(namespace.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        if let Err(e) = namespaces.create(&PostParams::default(), &ns).await {
            warn!(%namespace, error = %e, "cannot create the namespace of controller ServiceAccounts");
        }
    }
    let sa = ServiceAccount {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &sa).await {
        Ok(sa) => {
            info!(%namespace, %name, "created ServiceAccount for controller credentials");
            Ok(sa)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => api.get(name).await,
        Err(e) => Err(e),
    }
}

struct Cached {
    token: String,
    refresh_at: Instant,
}

/// The token of one ServiceAccount, shared by every client built for that name.
pub(crate) struct ServiceAccountToken {
    root: kube::Client,
    namespace: String,
    name: String,
    cached: tokio::sync::Mutex<Option<Cached>>,
}

impl ServiceAccountToken {
    pub(crate) fn new(root: kube::Client, namespace: &str, name: &str) -> Self {
        ServiceAccountToken {
            root,
            namespace: namespace.to_string(),
            name: name.to_string(),
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// The current token, fetched first when there is none or it is due for rotation.
    pub(crate) async fn token(&self) -> Result<String, TokenError> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref()
            && Instant::now() < c.refresh_at
        {
            return Ok(c.token.clone());
        }
        match self.fetch().await {
            Ok(fresh) => {
                let token = fresh.token.clone();
                *cached = Some(fresh);
                Ok(token)
            }
            Err(e) => match cached.as_ref() {
                Some(old) => {
                    warn!(error = %e, "unable to rotate token; using the previous one");
                    Ok(old.token.clone())
                }
                None => Err(e),
            },
        }
    }

    /// Forgets the cached token (the API server refused it).
    pub(crate) async fn reset(&self) {
        *self.cached.lock().await = None;
    }

    async fn fetch(&self) -> Result<Cached, TokenError> {
        let api: Api<ServiceAccount> = Api::namespaced(self.root.clone(), &self.namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(TOKEN_EXPIRATION_SECONDS),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut delay = FETCH_FIRST_DELAY;
        let mut last = String::new();
        for attempt in 1..=FETCH_ATTEMPTS {
            let answer = match get_or_create_service_account(
                &self.root,
                &self.namespace,
                &self.name,
            )
            .await
            {
                Ok(_) => api
                    .create_token_request(&self.name, &PostParams::default(), &request)
                    .await
                    .map_err(|e| format!("get token failed: {e}")),
                Err(e) => Err(format!("get or create service account failed: {e}")),
            };
            match answer {
                Ok(answer) => return self.cache(answer),
                Err(e) => {
                    warn!(namespace = %self.namespace, name = %self.name, error = %e, "token request failed");
                    last = e;
                }
            }
            if attempt < FETCH_ATTEMPTS {
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
        Err(self.error(last))
    }

    fn cache(&self, answer: TokenRequest) -> Result<Cached, TokenError> {
        let status = answer
            .status
            .ok_or_else(|| self.error("the TokenRequest answer has no status".to_string()))?;
        let now = jiff::Timestamp::now();
        let left = status
            .expiration_timestamp
            .0
            .duration_since(now)
            .try_into()
            .unwrap_or(Duration::ZERO);
        let lifetime = left.max(MIN_LIFETIME);
        let leeway = lifetime.mul_f64(f64::from(TOKEN_LEEWAY_PERCENT) / 100.0);
        Ok(Cached {
            token: status.token,
            refresh_at: Instant::now() + (lifetime - leeway),
        })
    }

    fn error(&self, message: String) -> TokenError {
        TokenError {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            message,
        }
    }
}

/// Sends each request with the ServiceAccount's current bearer token.
#[derive(Clone)]
pub(crate) struct BearerTokenLayer {
    source: Arc<ServiceAccountToken>,
}

impl BearerTokenLayer {
    pub(crate) fn new(source: Arc<ServiceAccountToken>) -> Self {
        BearerTokenLayer { source }
    }
}

impl<S> Layer<S> for BearerTokenLayer {
    type Service = BearerToken<S>;
    fn layer(&self, inner: S) -> Self::Service {
        BearerToken {
            inner,
            source: self.source.clone(),
        }
    }
}

/// The service made by [`BearerTokenLayer`]; clones the inner service per call (put a `Buffer`
/// under it), because the token is awaited inside the response future.
#[derive(Clone)]
pub(crate) struct BearerToken<S> {
    inner: S,
    source: Arc<ServiceAccountToken>,
}

impl<S, B, RB> Service<Request<B>> for BearerToken<S>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: From<TokenError> + Send,
    B: Send + 'static,
    RB: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        let source = self.source.clone();
        Box::pin(async move {
            let token = source.token().await?;
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                source.error("the API server issued a token that is not a valid header".into())
            })?;
            request.headers_mut().insert(AUTHORIZATION, value);
            let response = inner.oneshot(request).await?;
            if response.status() == StatusCode::UNAUTHORIZED {
                source.reset().await;
            }
            Ok(response)
        })
    }
}
