//! [`WebhookServer`]: one route per path on the framework's serving layer
//! ([`crate::serving::Server`]: TLS with certificates reloaded from their files, HTTP/1.1 and
//! HTTP/2, connection limits, a shutdown that answers every review in flight). Each body is
//! read in full, up to controller-runtime's 7 MiB, before its route sees it; an unknown path is
//! a 404 naming it.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use tokio_util::sync::CancellationToken;
use tower::{Service, ServiceExt};

use super::endpoint::{WebhookResponse, text};
use super::layers::Route;
use crate::serving::{ServeError, Server};

/// The largest review body read (controller-runtime's limit).
pub const MAX_BODY: usize = 7 * 1024 * 1024;

/// The routes of a webhook server, by path.
#[derive(Clone, Default)]
pub struct WebhookServer {
    routes: BTreeMap<String, Route>,
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookServer")
            .field("paths", &self.routes.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl WebhookServer {
    /// A server with no routes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `route` at `path`; a path already taken keeps its route and is the error.
    pub fn route(mut self, path: impl Into<String>, route: Route) -> Result<Self, String> {
        let path = path.into();
        if self.routes.contains_key(&path) {
            return Err(path);
        }
        self.routes.insert(path, route);
        Ok(self)
    }

    /// The paths served, sorted.
    pub fn paths(&self) -> Vec<&str> {
        self.routes.keys().map(String::as_str).collect()
    }

    /// Serves the routes on `server` until `shutdown`, then answers every review in flight and
    /// returns.
    pub async fn serve(
        self,
        server: Server,
        shutdown: CancellationToken,
    ) -> Result<(), ServeError> {
        let router = Router {
            routes: Arc::new(self.routes),
        };
        server.serve(router, shutdown).await
    }
}

/// Dispatches by path.
#[derive(Clone)]
struct Router {
    routes: Arc<BTreeMap<String, Route>>,
}

impl Service<http::Request<Incoming>> for Router {
    type Response = WebhookResponse;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<WebhookResponse, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Incoming>) -> Self::Future {
        let route = self.routes.get(request.uri().path()).cloned();
        Box::pin(async move {
            let Some(route) = route else {
                let path = request.uri().path().to_string();
                return Ok(text(404, &format!("no webhook is served at {path}")));
            };
            if request.method() != http::Method::POST {
                return Ok(text(
                    405,
                    &format!(
                        "method {} not allowed; reviews are POSTed",
                        request.method()
                    ),
                ));
            }
            let (parts, body) = request.into_parts();
            let body = match Limited::new(body, MAX_BODY).collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(error) => {
                    return Ok(
                        match error.downcast_ref::<http_body_util::LengthLimitError>() {
                            Some(_) => {
                                text(413, &format!("the review is larger than {MAX_BODY} bytes"))
                            }
                            None => text(400, &format!("cannot read the review: {error}")),
                        },
                    );
                }
            };
            route.oneshot(http::Request::from_parts(parts, body)).await
        })
    }
}
