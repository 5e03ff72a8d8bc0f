//! Self-managed webhook certificates against kube-testenv: replicas starting at once share one
//! Secret (the first writer wins), a renewal keeps the CA, the CA bundle is injected into a
//! CRD's conversion stanza, and a manager serves its webhooks with them: a client trusting only
//! the Secret's bundle connects, before and after a forced renewal, and no review fails meanwhile.

mod support;

use std::convert::Infallible;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use controller_manager::certs::{Managed, ROTATE_ANNOTATION, SelfManagedCerts};
use controller_manager::manager::{Manager, ManagerConfig};
use controller_manager::testing::Requests;
use controller_manager::webhook::{WebhookInitializer, WebhookServing, Webhooks};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube_testenv::TestEnv;
use serde_json::json;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

fn certs(names: &[&str]) -> SelfManagedCerts {
    SelfManagedCerts::new(
        "kube-system",
        "webhook-certs",
        names.iter().map(|n| n.to_string()).collect(),
    )
}

#[tokio::test]
async fn replicas_starting_at_once_share_one_secret_and_the_first_writer_wins() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let mine = certs(&["localhost"]);
    let (a, b, c) = tokio::join!(
        mine.ensure(&client),
        mine.ensure(&client),
        mine.ensure(&client)
    );
    let (a, b, c) = (a.unwrap(), b.unwrap(), c.unwrap());
    assert_eq!(a, b);
    assert_eq!(b, c);
    let created = Requests::of(&env)
        .verb("create")
        .resource("secrets")
        .count();
    assert!(created >= 1, "{created}");
    let secret: Secret = Api::namespaced(client.clone(), "kube-system")
        .get("webhook-certs")
        .await
        .unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let keys: Vec<_> = secret.data.unwrap().into_keys().collect();
    assert_eq!(
        keys,
        ["ca-bundle.crt", "ca.crt", "ca.key", "tls.crt", "tls.key"]
    );
    // Nothing is due: a later start adopts it as it is.
    assert_eq!(mine.ensure(&client).await.unwrap(), a);
}

#[tokio::test]
async fn a_renewal_keeps_the_ca_and_a_forced_one_happens_once() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let first = certs(&["localhost"]).ensure(&client).await.unwrap();
    let renamed = certs(&["localhost", "webhook.kube-system.svc"])
        .ensure(&client)
        .await
        .unwrap();
    assert_ne!(renamed.serving, first.serving, "new names, new certificate");
    assert_eq!(renamed.ca_bundle, first.ca_bundle, "same CA");

    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let rotate = json!({"metadata": {"annotations": {ROTATE_ANNOTATION: "now"}}});
    secrets
        .patch(
            "webhook-certs",
            &PatchParams::default(),
            &Patch::Merge(&rotate),
        )
        .await
        .unwrap();
    let both = certs(&["localhost", "webhook.kube-system.svc"]);
    let rotated = both.ensure(&client).await.unwrap();
    assert_ne!(rotated.serving, renamed.serving);
    assert_eq!(
        both.ensure(&client).await.unwrap(),
        rotated,
        "the annotation is gone"
    );
}

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.wh.example.com"},
        "spec": {"group": "wh.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}},
                {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": "https://127.0.0.1:9443/convert"},
                "conversionReviewVersions": ["v1"]}}}
    }))
    .unwrap()
}

#[tokio::test]
async fn the_ca_bundle_is_injected_into_a_crd_conversion_stanza() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd()).await.unwrap();
    let managed: Managed = "CustomResourceDefinition/widgets.wh.example.com"
        .parse()
        .unwrap();
    let mine = certs(&["localhost"]).managing(vec![managed.clone()]);
    let stop = CancellationToken::new();
    let (_, task) = mine.start(client.clone(), stop.clone()).await.unwrap();
    let stored = mine.ensure(&client).await.unwrap();
    let crd = crds.get("widgets.wh.example.com").await.unwrap();
    let config = crd
        .spec
        .conversion
        .unwrap()
        .webhook
        .unwrap()
        .client_config
        .unwrap();
    assert_eq!(config.ca_bundle.unwrap().0, stored.ca_bundle.as_bytes());
    assert_eq!(
        config.url.as_deref(),
        Some("https://127.0.0.1:9443/convert"),
        "untouched"
    );
    // Injecting again writes nothing.
    assert!(!managed.inject(&client, &stored.ca_bundle).await.unwrap());
    stop.cancel();
    task.await.unwrap();

    assert_eq!(
        "Deployment/x".parse::<Managed>().unwrap_err(),
        "\"Deployment/x\": Deployment is not ValidatingWebhookConfiguration, MutatingWebhookConfiguration or CustomResourceDefinition"
    );
}

fn allow_all() -> Webhooks<()> {
    Webhooks::new().with(WebhookInitializer::raw("allow", "/allow", |_| async {
        Ok(tower::service_fn(
            |r: AdmissionRequest<DynamicObject>| async move {
                Ok::<_, Infallible>(AdmissionResponse::from(&r))
            },
        ))
    }))
}

/// POSTs a review to `/allow` trusting only `bundle`; the status, or the error.
async fn review(port: u16, bundle: &str) -> Result<u16, String> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "CREATE", "name": "x", "userInfo": {},
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"}}});
    let request = http::Request::post("/allow")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok(status)
}

/// The leaf certificate presented to a new connection.
async fn presented(port: u16, bundle: &str) -> Vec<u8> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

#[tokio::test]
async fn a_manager_serves_with_self_managed_certificates_through_a_forced_renewal() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let free = || {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let (admin, hooks) = (free(), free());
    let mut mine = certs(&["localhost"]);
    mine.resync = Duration::from_millis(200);
    let mut config = ManagerConfig::new("certs-test");
    config.admin_addr = Some(admin);
    config.admin_tls = None;
    let serving = WebhookServing::self_managed(hooks, mine.clone());
    let manager =
        Manager::new(config, client.clone(), ()).with_webhooks(allow_all(), Some(serving));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));
    support::until(admin, "/readyz?verbose", |s, b| {
        s == 200 && b.contains("[+]webhook-server ok")
    })
    .await;

    let bundle = mine.ensure(&client).await.unwrap().ca_bundle;
    assert_eq!(review(hooks.port(), &bundle).await, Ok(200));
    let before = presented(hooks.port(), &bundle).await;

    // Reviews flow while the serving certificate is renewed; none may fail.
    let flowing = CancellationToken::new();
    let flow = {
        let (flowing, bundle) = (flowing.clone(), bundle.clone());
        tokio::spawn(async move {
            let mut answered = 0;
            while !flowing.is_cancelled() {
                assert_eq!(
                    review(hooks.port(), &bundle).await,
                    Ok(200),
                    "after {answered}"
                );
                answered += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            answered
        })
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let rotate = json!({"metadata": {"annotations": {ROTATE_ANNOTATION: "now"}}});
    secrets
        .patch(
            "webhook-certs",
            &PatchParams::default(),
            &Patch::Merge(&rotate),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while presented(hooks.port(), &bundle).await == before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the renewed certificate is never served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    flowing.cancel();
    let answered = flow.await.unwrap();
    assert!(answered > 0);
    let stored = mine.ensure(&client).await.unwrap();
    assert_eq!(stored.ca_bundle, bundle, "a renewal keeps the bundle");
    let served = presented(hooks.port(), &bundle).await;
    let leaf = CertificateDer::from_pem_slice(stored.serving.cert_pem.as_bytes()).unwrap();
    assert_eq!(
        served,
        leaf.to_vec(),
        "the Secret's certificate is the one served"
    );
    support::shut_down(&stop, run, WAIT).await;
}
