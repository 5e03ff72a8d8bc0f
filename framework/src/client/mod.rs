//! The `kube::Client` every controller uses: configuration from `--kubeconfig` / `--master` /
//! in-cluster, as upstream, and tower layers on kube's own HTTP stack for what kube lacks.
//!
//! Stack of one client, outermost first (kube adds the first and last parts):
//! 1. kube's `Buffer` (cheap clones);
//! 2. [`ApiTraceLayer`]: a client span per request, W3C `traceparent` injected;
//! 3. [`MetricsLayer`]: client-go's `rest_client_*` metrics (optional);
//! 4. [`RateLimitLayer`]: the `--kube-api-qps` / `--kube-api-burst` token bucket, watches exempt;
//! 5. a `Buffer`, so the limiter can clone the service below per request;
//! 6. kube's default stack: user agent and extra headers, auth, 429/503/504 retry, its own debug
//!    `HTTP` span, base URI, TLS connector.
//!
//! With `--use-service-account-credentials` a bearer-token layer sits between 4 and 5 (`token.rs`).
//!
//! As upstream, each client has its own rate limiter: [`ClientBuilder`] builds one client per
//! controller (each with its own user agent) so one busy controller cannot starve the others of
//! tokens.

mod builder;
mod kubeconfig;
mod metrics;
mod rate_limit;
mod request_info;
mod token;
mod trace;

use http::{HeaderValue, header::USER_AGENT};
use tower::buffer::BufferLayer;
use tower::util::option_layer;

use crate::options::ClientOptions;

pub use builder::ClientBuilder;
pub use kubeconfig::{KubeconfigError, config_from_kubeconfig};
pub use metrics::{
    ClientMetrics, LATENCY_BUCKETS, LatencyLabels, MetricsLayer, MetricsService,
    RequestResultLabels,
};
pub use rate_limit::{RateLimit, RateLimitLayer, TokenBucket};
pub use request_info::RequestInfo;
pub use token::{
    TOKEN_EXPIRATION_SECONDS, TOKEN_LEEWAY_PERCENT, TokenError, service_account_username,
};
pub use trace::{ApiTrace, ApiTraceLayer, inject_trace_context};

/// Requests queued in the inner buffer before callers wait; matches kube's own buffer.
const INNER_BUFFER: usize = 1024;

/// Why no client could be built; each says which flag to change.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The `--kubeconfig` file could not be read or used; the message names the file, key and
    /// line, never a value from it.
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    /// Neither flag was given and this is not a pod.
    #[error(
        "no API server configured: not running in a cluster ({0}); pass --kubeconfig or --master"
    )]
    NoConfig(#[source] kube::config::InClusterError),
    /// `--master` is not a URL.
    #[error("--master {value:?} is not a valid URL: {message}")]
    InvalidMaster {
        /// The flag value.
        value: String,
        /// The parser's complaint.
        message: String,
    },
    /// QPS and burst cannot make a token bucket.
    #[error("--kube-api-burst must be at least 1 when --kube-api-qps ({qps}) is positive")]
    InvalidRateLimit {
        /// Requested QPS.
        qps: f32,
    },
    /// The user agent cannot be sent as a header.
    #[error("user agent {0:?} is not a valid HTTP header value")]
    InvalidUserAgent(String),
    /// `--use-service-account-credentials`: the controller's ServiceAccount could not be read or
    /// created with the process's own credentials.
    #[error(
        "cannot get or create ServiceAccount {name} for --use-service-account-credentials (the process's own credentials need get and create on serviceaccounts in that namespace): {source}"
    )]
    ServiceAccount {
        /// `namespace/name` of the ServiceAccount.
        name: String,
        /// What the API server answered.
        #[source]
        source: kube::Error,
    },
    /// kube could not build its HTTP stack (TLS material, proxy, auth plugin).
    #[error("cannot build the API client: {0}")]
    Build(#[source] kube::Error),
    /// The client certificate or key in the configuration could not be loaded; the reason
    /// names the field, never its data.
    #[error("cannot build the API client: {0}")]
    Identity(String),
}

/// Loads the configuration from the flags and builds a client with `user_agent` (upstream:
/// `<binary>/<version> (<os>/<arch>) kubernetes/<commit>/<controller>`). Needs a Tokio runtime.
pub async fn build_client(
    opts: &ClientOptions,
    user_agent: &str,
    metrics: Option<&ClientMetrics>,
) -> Result<kube::Client, ClientError> {
    let config = load_config(opts).await?;
    client_from_config(
        config,
        opts.kube_api_qps,
        opts.kube_api_burst,
        user_agent,
        metrics,
    )
}

/// client-go's `BuildConfigFromFlags`: `--kubeconfig` when given (its server replaced by
/// `--master` if both are set); else `--master` alone, with no credentials; else the in-cluster
/// service account. As upstream, `$KUBECONFIG` and `~/.kube/config` are never read implicitly.
pub async fn load_config(opts: &ClientOptions) -> Result<kube::Config, ClientError> {
    let master = opts
        .master
        .as_deref()
        .filter(|m| !m.trim().is_empty())
        .map(parse_master)
        .transpose()?;
    let mut config = match (&opts.kubeconfig, &master) {
        (Some(path), _) => config_from_kubeconfig(path).await?,
        (None, Some(url)) => kube::Config::new(url.clone()),
        (None, None) => kube::Config::incluster().map_err(ClientError::NoConfig)?,
    };
    if let Some(url) = master {
        config.cluster_url = url;
    }
    Ok(config)
}

/// Builds a client from a ready `config` with the framework's layers. `qps <= 0` turns the
/// rate limiter off (client-go's negative-QPS convention). Needs a Tokio runtime.
pub fn client_from_config(
    config: kube::Config,
    qps: f32,
    burst: u32,
    user_agent: &str,
    metrics: Option<&ClientMetrics>,
) -> Result<kube::Client, ClientError> {
    build_layered(config, qps, burst, user_agent, metrics, None)
}

/// [`client_from_config`] with an optional bearer-token layer under the limiter.
fn build_layered(
    mut config: kube::Config,
    qps: f32,
    burst: u32,
    user_agent: &str,
    metrics: Option<&ClientMetrics>,
    token: Option<token::BearerTokenLayer>,
) -> Result<kube::Client, ClientError> {
    let limited = qps.is_finite() && qps > 0.0;
    if limited && burst == 0 {
        return Err(ClientError::InvalidRateLimit { qps });
    }
    let user_agent_value = HeaderValue::from_str(user_agent)
        .map_err(|_| ClientError::InvalidUserAgent(user_agent.to_string()))?;
    config.headers.push((USER_AGENT, user_agent_value));
    let host = config
        .cluster_url
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_default();

    let rate_limit = limited.then(|| {
        RateLimitLayer::new(
            TokenBucket::new(qps, burst),
            metrics.map(|m| (m.clone(), host.clone())),
        )
    });
    let metrics_layer = metrics.map(|m| MetricsLayer::new(m.clone(), host.clone()));
    let builder = kube::client::ClientBuilder::try_from(config)
        .map_err(|e| match e {
            // Its message would quote a character of undecodable key data.
            kube::Error::InferKubeconfig(e) => ClientError::Identity(kubeconfig::redacted(&e)),
            other => ClientError::Build(other),
        })?
        .with_layer(&BufferLayer::new(INNER_BUFFER))
        .with_layer(&option_layer(token))
        .with_layer(&option_layer(rate_limit))
        .with_layer(&option_layer(metrics_layer))
        .with_layer(&ApiTraceLayer::new(host));
    Ok(builder.build())
}

/// client-go's `DefaultServerURL`: a bare `host:port` means HTTPS.
fn parse_master(value: &str) -> Result<http::Uri, ClientError> {
    let value = value.trim();
    let with_scheme = if value.contains("://") {
        value.to_string()
    } else {
        format!("https://{value}")
    };
    with_scheme
        .parse::<http::Uri>()
        .map_err(|e| e.to_string())
        .and_then(|uri| match uri.authority() {
            Some(_) => Ok(uri),
            None => Err("it has no host".to_string()),
        })
        .map_err(|message| ClientError::InvalidMaster {
            value: value.to_string(),
            message,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(kubeconfig: Option<&str>, master: Option<&str>) -> ClientOptions {
        ClientOptions {
            kubeconfig: kubeconfig.map(std::path::PathBuf::from),
            master: master.map(str::to_string),
            kube_api_qps: 20.0,
            kube_api_burst: 30,
            use_service_account_credentials: false,
        }
    }

    #[test]
    fn master_without_scheme_means_https() {
        assert_eq!(
            parse_master("10.0.0.1:6443").unwrap().to_string(),
            "https://10.0.0.1:6443/"
        );
        assert_eq!(
            parse_master("http://127.0.0.1:8080").unwrap().scheme_str(),
            Some("http")
        );
        assert!(matches!(
            parse_master("http://"),
            Err(ClientError::InvalidMaster { .. })
        ));
    }

    #[tokio::test]
    async fn master_alone_is_used_without_credentials() {
        let config = load_config(&opts(None, Some("http://127.0.0.1:8080")))
            .await
            .unwrap();
        assert_eq!(config.cluster_url.to_string(), "http://127.0.0.1:8080/");
    }

    #[tokio::test]
    async fn master_overrides_the_kubeconfig_server() {
        let dir = std::env::temp_dir().join(format!("client-test-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            r#"apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://10.1.1.1:6443"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: ns1}}]
current-context: x
"#,
        )
        .unwrap();
        let path_str = path.to_str().unwrap();
        let from_file = load_config(&opts(Some(path_str), None)).await.unwrap();
        assert_eq!(from_file.cluster_url.to_string(), "http://10.1.1.1:6443/");
        assert_eq!(from_file.default_namespace, "ns1");
        let overridden = load_config(&opts(Some(path_str), Some("http://10.2.2.2:1")))
            .await
            .unwrap();
        assert_eq!(overridden.cluster_url.to_string(), "http://10.2.2.2:1/");
        assert_eq!(overridden.default_namespace, "ns1");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn unreadable_kubeconfig_names_the_file() {
        let err = load_config(&opts(Some("/nonexistent/kubeconfig"), None))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }

    #[tokio::test]
    async fn zero_burst_with_positive_qps_is_rejected() {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let result = client_from_config(config, 5.0, 0, "ua", None);
        assert!(matches!(result, Err(ClientError::InvalidRateLimit { .. })));
    }

    #[tokio::test]
    async fn bad_user_agent_is_rejected() {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let result = client_from_config(config, 5.0, 1, "bad\nagent", None);
        assert!(matches!(result, Err(ClientError::InvalidUserAgent(_))));
    }
}
