//! The second adversarial probe's repros (issue 36) against kube-testenv over HTTP with a real
//! client: a large strategic merge patch neither stalls the server nor outlives its deadline,
//! JSON as deep as upstream accepts, and forged `continue` tokens.

use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, PostParams};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

/// Sends a raw request with a client that does not retry; the status and the JSON body.
async fn send(env: &TestEnv, method: &str, path: &str, ct: &str, body: Vec<u8>) -> (u16, Value) {
    let mut cfg = env.config();
    cfg.default_retry = false;
    let client = kube::Client::try_from(cfg).unwrap();
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(kube::client::Body::from(body))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

async fn service(env: &TestEnv, name: &str) {
    let svc = json!({"metadata": {"name": name}, "spec": {"ports": [{"port": 80}]}});
    let api: Api<Service> = Api::default_namespaced(env.client());
    api.create(
        &PostParams::default(),
        &serde_json::from_value(svc).unwrap(),
    )
    .await
    .unwrap();
}

/// The probe's patch: `$setElementOrder/ports` and `ports`, each with `n` items (`named`: with
/// the names that make a list of several ports valid).
fn set_element_order_patch(n: usize, named: bool) -> Vec<u8> {
    let order: Vec<Value> = (1..=n).map(|i| json!({"port": i})).collect();
    let port = |i: usize| match named {
        true => json!({"port": i, "name": format!("p{i}")}),
        false => json!({"port": i}),
    };
    let ports: Vec<Value> = (1..=n).map(port).collect();
    serde_json::to_vec(&json!({"spec": {"$setElementOrder/ports": order, "ports": ports}})).unwrap()
}

const SMP: &str = "application/strategic-merge-patch+json";

/// Issue 36 item 2: n = 10,000 took 7.8 s and held up every other request; n = 90,000 (2.7 MB)
/// had not answered after 5 minutes. Now it is answered (422: ports above 65535 are invalid),
/// and a GET sent meanwhile is answered before it.
#[tokio::test]
async fn a_90000_item_set_element_order_patch_completes_and_others_are_served() {
    let env = TestEnv::start().await.unwrap();
    service(&env, "s1").await;
    let path = "/api/v1/namespaces/default/services/s1";
    let patch = set_element_order_patch(90_000, false);
    let started = Instant::now();
    let big = {
        let env = env.clone();
        tokio::spawn(async move { send(&env, "PATCH", path, SMP, patch).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (code, got) = send(
        &env,
        "GET",
        "/api/v1/namespaces/default/services/s1",
        "",
        vec![],
    )
    .await;
    assert_eq!((code, got["metadata"]["name"].as_str()), (200, Some("s1")));
    let got_at = started.elapsed();
    let (code, answer) = big.await.unwrap();
    let patched_at = started.elapsed();
    assert_eq!(code, 422, "{answer:#}");
    eprintln!("n = 90000: GET answered after {got_at:?}, the patch after {patched_at:?}");
    // Within the port range, the merged list comes back in the patch's order.
    service(&env, "s2").await;
    let path = "/api/v1/namespaces/default/services/s2";
    let (code, answer) = send(
        &env,
        "PATCH",
        path,
        SMP,
        set_element_order_patch(3_000, true),
    )
    .await;
    assert_eq!(code, 200, "{answer:#}");
    let ports = answer["spec"]["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 3_000);
    assert!(ports.iter().zip(1..).all(|(p, i)| p["port"] == i));
    // The original's port 80 was named by no one: upstream slots it in before port 81.
    assert_eq!(
        ports[79],
        json!({"port": 80, "protocol": "TCP", "targetPort": 80, "name": "p80"})
    );
}

/// kube-apiserver answers a request still running at `--request-timeout` with its 504.
#[tokio::test]
async fn a_request_past_its_deadline_is_answered_504_timeout() {
    let env = TestEnv::builder()
        .request_timeout(Duration::from_millis(300))
        .start()
        .await
        .unwrap();
    service(&env, "s1").await;
    let path = "/api/v1/namespaces/default/services/s1";
    let (code, status) = send(
        &env,
        "PATCH",
        path,
        SMP,
        set_element_order_patch(90_000, false),
    )
    .await;
    assert_eq!(code, 504, "{status:#}");
    assert_eq!(
        status,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Timeout: request did not complete within requested timeout - context deadline exceeded",
            "reason": "Timeout", "details": {}, "code": 504
        })
    );
}
