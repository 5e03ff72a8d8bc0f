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

/// Issue 36 item 6: a forged `continue` token whose start key climbs out of the list's prefix
/// is refused as upstream's storage refuses it; real tokens still page through a namespace.
#[tokio::test]
async fn forged_continue_tokens_are_refused_as_upstream() {
    use base64::Engine;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ListParams;
    let env = TestEnv::start().await.unwrap();
    for (ns, name) in [
        ("default", "a"),
        ("default", "b"),
        ("default", "c"),
        ("kube-system", "z"),
    ] {
        let api: Api<ConfigMap> = Api::namespaced(env.client(), ns);
        let cm = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(1);
    loop {
        let page = api.list(&lp).await.unwrap();
        names.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(names, ["a", "b", "c"]);
    let rv = env.resource_version();
    let forged = format!(r#"{{"v":"meta.k8s.io/v1","rv":{rv},"start":"../../kube-system/"}}"#);
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(forged);
    let path = format!("/api/v1/namespaces/default/configmaps?limit=5&continue={token}");
    let (code, status) = send(&env, "GET", &path, "", vec![]).await;
    assert_eq!(code, 400, "{status:#}");
    assert_eq!(
        status,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "invalid continue token: continue key is not valid: ../../kube-system/",
            "reason": "BadRequest", "code": 400
        })
    );
}

/// `{"spec": {"a": {"a": ...}}}`, `depth` levels of JSON in all (the object itself included).
fn deep_object(depth: usize) -> Vec<u8> {
    let inner = depth - 1;
    let head = r#"{"apiVersion":"example.com/v1","kind":"Deep","metadata":{"name":"d"},"spec":"#;
    let mut s = String::from(head);
    s.push_str(&r#"{"a":"#.repeat(inner));
    s.push('1');
    s.push_str(&"}".repeat(inner + 1));
    s.into_bytes()
}

/// The deepest nesting of a JSON text (strings hold no brackets here).
fn depth_of(body: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0);
    for c in body {
        match c {
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Issue 36 item 6: kube-apiserver reads JSON up to 10,000 levels deep (Go's scanner); we
/// refused past 128. A custom resource that keeps unknown fields is stored and read back at
/// 10,000 levels; one level more gets upstream's 400.
#[tokio::test]
async fn json_is_read_10000_levels_deep_as_upstream() {
    // Field tracking at 10,000 levels takes seconds of CPU in a debug build: a loaded machine
    // must not turn it into a 504.
    let env = TestEnv::builder()
        .request_timeout(Duration::from_secs(600))
        .start()
        .await
        .unwrap();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "deeps.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "deeps", "singular": "deep", "kind": "Deep"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }}}]}
    });
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (code, v) = send(
        &env,
        "POST",
        crds,
        "application/json",
        crd.to_string().into(),
    )
    .await;
    assert_eq!(code, 201, "{v:#}");
    let deeps = "/apis/example.com/v1/namespaces/default/deeps";
    while send(&env, "GET", deeps, "", vec![]).await.0 != 200 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ct = "application/json";
    let (code, v) = send(&env, "POST", deeps, ct, deep_object(10_001)).await;
    assert_eq!(code, 400, "{v:#}");
    assert_eq!(
        v["message"],
        r#"the object provided is unrecognized (must be of type Deep): couldn't get version/kind; json parse error: invalid character '{' exceeded max depth ({"apiVersion":"example.com/v1" ...)"#
    );
    let (code, _) = send(&env, "POST", deeps, ct, deep_object(10_000)).await;
    assert_eq!(code, 201);
    // The answer is too deep for this client's serde_json: read it as text.
    let req = http::Request::get(format!("{deeps}/d"))
        .body(Vec::new())
        .unwrap();
    let got = env.client().request_text(req).await.unwrap();
    // `spec` holds the 9,999 levels below the object's own (managedFields mirror them deeper).
    let spec = got.find(r#""spec":"#).unwrap();
    assert_eq!(depth_of(&got.as_bytes()[spec..]), 9_999);
    // A patch one level too deep is refused in Go's words.
    let inner = 10_000;
    let patch = format!(
        "{{\"spec\":{}2{}}}",
        r#"{"a":"#.repeat(inner),
        "}".repeat(inner)
    );
    let merge = "application/merge-patch+json";
    let (code, v) = send(&env, "PATCH", &format!("{deeps}/d"), merge, patch.into()).await;
    assert_eq!(
        (code, v["message"].as_str()),
        (400, Some("invalid character '{' exceeded max depth"))
    );
}
