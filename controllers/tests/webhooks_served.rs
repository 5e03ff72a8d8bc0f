//! A distro's webhook on the stock cloud-controller-manager: added with
//! `CloudControllerManager::webhook`, selected with `--webhooks`, served over HTTPS on
//! `--webhook-secure-port` from the files in `--webhook-cert-dir` once the
//! `CloudControllerManagerWebhook` gate is on, as upstream's `WebhookConfig` map is.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use cloud_controllers::app::{CloudControllerManager, CloudManagerOptions};
use controller_manager::serving::SelfSignedPair;
use controller_manager::webhook::{Review, Validator, Verdict, WebhookInitializer};
use fake_cloud::{Facets, FakeCloud};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_testenv::TestEnv;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

/// Refuses every ConfigMap named `forbidden`.
struct NoForbidden;

impl Validator<ConfigMap> for NoForbidden {
    async fn validate(&self, review: &Review<ConfigMap>) -> Verdict {
        match review.name.as_str() {
            "forbidden" => Verdict::deny("that name is taken").with_code(422),
            _ => Verdict::allow(),
        }
    }
}

fn review(name: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u-1", "operation": "CREATE", "name": name, "namespace": "default",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}}
        }
    })
}

#[tokio::test]
async fn a_distros_webhook_is_served_with_the_gate_and_its_flags() {
    let env = TestEnv::start().await.unwrap();
    let dir = std::env::temp_dir().join(format!("ccm-webhook-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pair = SelfSignedPair::generate().unwrap();
    std::fs::write(dir.join("tls.crt"), &pair.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &pair.key_pem).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();

    let options = CloudManagerOptions::from_args([
        "--cloud-provider=fake".to_string(),
        "--leader-elect=false".to_string(),
        "--secure-port=0".to_string(),
        "--controllers=cloud-node".to_string(),
        "--feature-gates=CloudControllerManagerWebhook=true".to_string(),
        "--webhooks=no-forbidden".to_string(),
        "--webhook-bind-address=127.0.0.1".to_string(),
        format!("--webhook-secure-port={port}"),
        format!("--webhook-cert-dir={}", dir.display()),
    ])
    .unwrap();
    let cloud = FakeCloud::builder().facets(Facets::all()).build().unwrap();
    let stop = CancellationToken::new();
    let run = CloudControllerManager::new("webhook-ccm", options)
        .webhook(WebhookInitializer::validating::<ConfigMap, _, _, _>(
            "no-forbidden",
            "/validate-configmap",
            |_| async { Ok(NoForbidden) },
        ))
        .with_cloud(Arc::new(cloud))
        .with_client_config(env.config())
        .without_telemetry()
        .run(stop.clone());
    let task = tokio::spawn(run);

    // A TLS client of the webhook port; the certificate chain itself is checked by the
    // framework's own tests, this one checks the wiring.
    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    config.accept_invalid_certs = true;
    let client = kube::Client::try_from(config).unwrap();
    let post = |name: &str| {
        http::Request::post("/validate-configmap?timeout=10s")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&review(name)).unwrap())
            .unwrap()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    let allowed: Value = loop {
        match client.request(post("fine")).await {
            Ok(answer) => break answer,
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the webhook port never answered: {e}"),
        }
    };
    assert_eq!(allowed["response"]["allowed"], true, "{allowed}");
    assert_eq!(allowed["response"]["uid"], "u-1");
    let denied: Value = client.request(post("forbidden")).await.unwrap();
    assert_eq!(denied["response"]["allowed"], false);
    assert_eq!(
        denied["response"]["status"],
        json!({"code": 422, "message": "that name is taken"})
    );

    stop.cancel();
    tokio::time::timeout(WAIT, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
