//! The admin routes on axum, served by a [`Server`] of the serving layer until the process
//! token fires.
//!
//! Routes: `/healthz`, `/readyz`, `/livez` (each with `/<endpoint>/<check>`), `/metrics`,
//! `/metrics/slis`, `/configz` and, with [`AdminServer::with_profiling`], `/debug/pprof`; with
//! [`AdminServer::with_auth`] every request passes
//! delegated authentication and authorization first, as upstream's handler chain.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use super::AdminError;
use super::auth::{DelegatedAuth, guard};
use super::configz::Configz;
use super::health::HealthChecks;
use super::pprof;
use super::slis::Slis;
use super::text::text;
use crate::profiling::Profiling;
use crate::serving::{ConnectionLimits, Server, SocketSharing, Tls, TlsSettings};

/// OpenMetrics text exposition, what prometheus-client encodes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone)]
struct Endpoints {
    healthz: HealthChecks,
    readyz: HealthChecks,
    livez: HealthChecks,
    registry: Arc<Mutex<Registry>>,
    slis: Slis,
    configz: Configz,
}

impl Endpoints {
    fn checks(&self, endpoint: &str) -> &HealthChecks {
        match endpoint {
            "readyz" => &self.readyz,
            "livez" => &self.livez,
            _ => &self.healthz,
        }
    }
}

/// Serves probes and metrics for the whole process; bound at construction so `--secure-port=0`
/// style callers and tests learn the port before serving.
pub struct AdminServer {
    server: Server,
    endpoints: Endpoints,
    auth: Option<Arc<DelegatedAuth>>,
    profiling: Profiling,
}

impl std::fmt::Debug for AdminServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminServer")
            .field("server", &self.server)
            .field("auth", &self.auth)
            .field("profiling", &self.profiling)
            .finish_non_exhaustive()
    }
}

impl AdminServer {
    /// Binds `addr` and prepares `/healthz`, `/readyz`, `/livez` (each with `/<endpoint>/<check>`),
    /// `/metrics`, `/metrics/slis` and an empty `/configz`.
    pub fn new(
        addr: SocketAddr,
        health: HealthChecks,
        ready: HealthChecks,
        live: HealthChecks,
        registry: Arc<Mutex<Registry>>,
    ) -> Result<Self, AdminError> {
        Self::new_shared(
            addr,
            SocketSharing::default(),
            health,
            ready,
            live,
            registry,
        )
    }

    /// As [`Self::new`], binding with `--permit-port-sharing` / `--permit-address-sharing`.
    pub fn new_shared(
        addr: SocketAddr,
        sharing: SocketSharing,
        health: HealthChecks,
        ready: HealthChecks,
        live: HealthChecks,
        registry: Arc<Mutex<Registry>>,
    ) -> Result<Self, AdminError> {
        Ok(Self {
            server: Server::bind(addr, sharing)?,
            endpoints: Endpoints {
                healthz: health,
                readyz: ready,
                livez: live,
                registry,
                slis: Slis::new(),
                configz: Configz::new(),
            },
            auth: None,
            profiling: Profiling::default(),
        })
    }

    /// Serves HTTPS with `tls` (its certificates from [`ServingCert::load`](super::ServingCert::load)
    /// or any other [`Certificates`](crate::serving::Certificates)) instead of plain HTTP.
    pub fn with_tls(mut self, tls: Tls) -> Self {
        self.server = self.server.with_tls(tls);
        self
    }

    /// HTTP/2 on or off (`--disable-http2-serving`) and its stream limit, from the TLS settings.
    pub fn with_http(mut self, settings: &TlsSettings) -> Self {
        self.server = self.server.with_http2(settings);
        self
    }

    /// Replaces the header, idle and connection-count limits (default: upstream's 32 s and 90 s,
    /// and a quarter of the open-file limit).
    pub fn with_connection_limits(mut self, limits: ConnectionLimits) -> Self {
        self.server = self.server.with_limits(limits);
        self
    }

    /// Authenticates and authorizes every request with `auth` before it is served.
    pub fn with_auth(mut self, auth: Arc<DelegatedAuth>) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Serves `configz` on `/configz`.
    pub fn with_configz(mut self, configz: Configz) -> Self {
        self.endpoints.configz = configz;
        self
    }

    /// Serves `/debug/pprof` when `profiling.enabled` (see [`Profiling`]).
    pub fn with_profiling(mut self, profiling: Profiling) -> Self {
        self.profiling = profiling;
        self
    }

    /// The bound address (the real port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    fn router(&self, shutdown: &CancellationToken) -> Router {
        let mut router = Router::new()
            .route("/metrics", get(metrics))
            .route("/metrics/slis", get(slis).delete(slis_reset))
            .route("/configz", get(configz));
        for endpoint in ["healthz", "readyz", "livez"] {
            router = router
                .route(
                    &format!("/{endpoint}"),
                    get(move |state, query| all_checks(state, query, endpoint)),
                )
                .route(
                    &format!("/{endpoint}/{{check}}"),
                    get(move |state, check| one_check(state, check, endpoint)),
                );
        }
        let mut router = router.with_state(self.endpoints.clone());
        if self.profiling.enabled {
            router = router.merge(pprof::routes(&self.profiling, shutdown.clone()));
        }
        match &self.auth {
            Some(auth) => router.layer(axum::middleware::from_fn_with_state(auth.clone(), guard)),
            None => router,
        }
    }

    /// Serves until `shutdown` is cancelled, then finishes in-flight requests and returns.
    pub async fn serve(self, shutdown: CancellationToken) -> Result<(), AdminError> {
        let router = self.router(&shutdown);
        tracing::info!(addr = %self.server.local_addr(), https = self.server.is_tls(), authenticated = self.auth.is_some(), "admin server listening");
        Ok(self.server.serve(router, shutdown).await?)
    }
}

/// `?verbose` (with or without a value) and every `?exclude=name`.
fn parse_query(query: Option<&str>) -> (bool, Vec<String>) {
    let mut verbose = false;
    let mut exclude = Vec::new();
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "verbose" => verbose = true,
            "exclude" => exclude.push(percent_decode(value)),
            _ => {}
        }
    }
    (verbose, exclude)
}

/// A query value unescaped as Go's `url.QueryUnescape` does (`+` is a space), invalid escapes
/// kept.
pub(crate) fn percent_decode(s: &str) -> String {
    let spaced = s.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8_lossy()
        .into_owned()
}

async fn all_checks(
    State(endpoints): State<Endpoints>,
    RawQuery(query): RawQuery,
    endpoint: &'static str,
) -> Response {
    let (verbose, exclude) = parse_query(query.as_deref());
    // Always evaluated verbosely, so the SLIs see every check; the terse `ok` is what a passing
    // non-verbose evaluation renders.
    let report = endpoints
        .checks(endpoint)
        .run(endpoint, &exclude, true)
        .await;
    endpoints.slis.observe(endpoint, &report.body);
    match (report.healthy, verbose) {
        (true, false) => text(StatusCode::OK, "ok".to_string()),
        (true, true) => text(StatusCode::OK, report.body),
        (false, _) => text(StatusCode::INTERNAL_SERVER_ERROR, report.body),
    }
}

async fn one_check(
    State(endpoints): State<Endpoints>,
    Path(check): Path<String>,
    endpoint: &'static str,
) -> Response {
    match endpoints.checks(endpoint).run_one(&check).await {
        Some(Ok(())) => text(StatusCode::OK, "ok".to_string()),
        Some(Err(reason)) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
        None => text(StatusCode::NOT_FOUND, "404 page not found\n".to_string()),
    }
}

async fn configz(State(endpoints): State<Endpoints>) -> Response {
    let mut response = (StatusCode::OK, endpoints.configz.render()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

async fn slis(State(endpoints): State<Endpoints>) -> Response {
    openmetrics(endpoints.slis.encode())
}

async fn slis_reset(State(endpoints): State<Endpoints>) -> Response {
    endpoints.slis.reset();
    text(StatusCode::OK, "metrics reset\n".to_string())
}

async fn metrics(State(endpoints): State<Endpoints>) -> Response {
    let mut body = String::new();
    let encoded = prometheus_client::encoding::text::encode(&mut body, &endpoints.registry.lock())
        .map(|()| body);
    openmetrics(encoded)
}

fn openmetrics(encoded: Result<String, std::fmt::Error>) -> Response {
    match encoded {
        Ok(body) => {
            let mut response = (StatusCode::OK, body).into_response();
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS));
            response
        }
        Err(e) => {
            tracing::error!(error = %e, "failed to encode metrics");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "failed to encode metrics\n".into(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parsing() {
        assert_eq!(parse_query(None), (false, vec![]));
        assert_eq!(parse_query(Some("verbose")), (true, vec![]));
        assert_eq!(
            parse_query(Some("exclude=a&verbose=1&exclude=b%2Dc")),
            (true, vec!["a".to_string(), "b-c".to_string()])
        );
        assert_eq!(percent_decode("100%"), "100%");
    }
}
