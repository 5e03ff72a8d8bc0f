//! The obvious alternative: a hand-written axum server, the way kube-rs documents a webhook
//! (`kube::core::admission` types decoded with serde_json, a kube-runtime reflector `Store` for
//! the cache), over the same rustls (ring) TLS and hyper's HTTP/1.1 and HTTP/2 as axum's
//! `low-level-rustls` example serves it. The body is read as bytes and decoded with
//! `serde_json::from_slice`, which is what axum's `Json` extractor does less its path tracking,
//! so the alternative is, if anything, favoured.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::post;
use bytes::Bytes;
use futures::StreamExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::rule;

/// The handler: decode the review, check the rule against the reflector's store, answer.
async fn validate(State(store): State<Store<ConfigMap>>, body: Bytes) -> impl IntoResponse {
    let review: Result<AdmissionReview<DynamicObject>, _> = serde_json::from_slice(&body);
    let request: AdmissionRequest<DynamicObject> = match review.map(TryInto::try_into) {
        Ok(Ok(request)) => request,
        Ok(Err(error)) => {
            return json(&AdmissionResponse::invalid(error.to_string()).into_review());
        }
        Err(error) => return json(&AdmissionResponse::invalid(error.to_string()).into_review()),
    };
    let response = AdmissionResponse::from(&request);
    let candidate = request
        .object
        .as_ref()
        .map(|o| serde_json::to_value(o).and_then(serde_json::from_value::<ConfigMap>));
    let answer = match candidate {
        Some(Ok(cm)) => {
            let cached = store.state();
            match rule::overlapping(&cm, &request.name, cached.iter().map(|c| &**c)) {
                Some(other) => response.deny(rule::message(&other)),
                None => response,
            }
        }
        Some(Err(error)) => response.deny(error.to_string()),
        None => response,
    };
    json(&answer.into_review())
}

/// The review as a JSON answer.
fn json(review: &AdmissionReview<DynamicObject>) -> axum::response::Response {
    let body = serde_json::to_vec(review).unwrap_or_default();
    ([(http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Serves `/validate` on `addr` until stdin closes.
pub async fn serve(
    client: kube::Client,
    addr: SocketAddr,
    cert: PathBuf,
    key: PathBuf,
) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::all(client);
    let (store, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .applied_objects()
        .for_each(|_| futures::future::ready(()));
    tokio::spawn(stream);
    store.wait_until_ready().await?;

    let certs = CertificateDer::pem_file_iter(&cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(&key)?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let app = Router::new()
        .route("/validate", post(validate))
        .with_state(store);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
                    .await;
            });
        }
    });
    crate::ready_until_stdin_closes().await;
    Ok(())
}
