//! Hostile CEL, through a real `kube::Client`: each gets a clear answer in bounded time. A rule
//! that does not compile, an expression nested past the parser's limit, a rule built to be
//! expensive (refused by its estimate) and one that only turns expensive on the object
//! (stopped at run time by the per-call limit), a regular expression that backtracking engines
//! choke on, and a CRD with 10,000 rules.

mod support;

use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use kube_testenv::TestEnv;
use serde_json::{Value, json};

async fn send(client: &kube::Client, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap())
}

fn crd(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{name}s.cel.example.com")},
        "spec": {"group": "cel.example.com", "scope": "Namespaced",
            "names": {"plural": format!("{name}s"), "kind": name.to_uppercase()},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]}})
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn first_cause(status: &Value) -> String {
    status["details"]["causes"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn hostile_rules_get_clear_answers_in_bounded_time() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let started = Instant::now();

    let deep = format!("{}true{}", "(".repeat(200), ")".repeat(200));
    let (code, got) = send(
        &client,
        "POST",
        CRDS,
        &crd(
            "deep",
            json!({"type": "object",
        "x-kubernetes-validations": [{"rule": deep}]}),
        ),
    )
    .await;
    assert_eq!(code, 422);
    assert!(
        first_cause(&got).contains("expression recursion limit exceeded"),
        "{got:#}"
    );

    let (code, got) = send(&client, "POST", CRDS, &crd("pricey", json!({"type": "object",
        "properties": {"l": {"type": "array", "items": {"type": "string"}}},
        "x-kubernetes-validations": [{"rule": "self.l.all(a, self.l.all(b, self.l.all(c, a + b + c != '')))"}]}))).await;
    assert_eq!(code, 422);
    assert!(
        first_cause(&got).contains("estimated rule cost exceeds budget"),
        "{got:#}"
    );

    // Within the estimate (bounded list, the inner loop's string comparison on short strings),
    // but a lot of work on a full object: the per-call limit stops it.
    let (code, got) = send(&client, "POST", CRDS, &crd("busy", json!({"type": "object",
        "properties": {"l": {"type": "array", "maxItems": 400, "items": {"type": "string", "maxLength": 2}},
                       "p": {"type": "string", "maxLength": 64}},
        "x-kubernetes-validations": [
            {"rule": "self.l.all(a, self.l.all(b, a.size() + b.size() >= 0))"},
            {"rule": "!has(self.p) || !'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab'.matches(self.p)", "message": "no match"}
        ]}))).await;
    assert_eq!(code, 201, "{got:#}");
    let l: Vec<&str> = vec!["ab"; 400];
    let obj = json!({"apiVersion": "cel.example.com/v1", "kind": "BUSY", "metadata": {"name": "b"},
        "spec": {"l": l, "p": "(a*)*$"}});
    let (code, got) = send(
        &client,
        "POST",
        "/apis/cel.example.com/v1/namespaces/default/busys",
        &obj,
    )
    .await;
    assert_eq!(code, 422, "{got:#}");
    assert!(
        first_cause(&got)
            .contains("no further validation rules will be run due to call cost exceeds limit"),
        "{got:#}"
    );
    // The regex alone: linear time, so it just answers.
    let obj = json!({"apiVersion": "cel.example.com/v1", "kind": "BUSY", "metadata": {"name": "r"},
        "spec": {"l": [], "p": "(a*)*$"}});
    let (code, got) = send(
        &client,
        "POST",
        "/apis/cel.example.com/v1/namespaces/default/busys",
        &obj,
    )
    .await;
    assert_eq!(code, 422, "{got:#}");
    assert_eq!(first_cause(&got), "Invalid value: \"object\": no match");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn ten_thousand_rules_install_and_run() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let rules: Vec<Value> = (0..10_000)
        .map(|i| json!({"rule": format!("self.size() != {}", i + 100), "message": format!("not {}", i + 100)}))
        .collect();
    let started = Instant::now();
    let (code, got) = send(&client, "POST", CRDS, &crd("many", json!({"type": "object",
        "properties": {"name": {"type": "string", "maxLength": 200, "x-kubernetes-validations": rules}}}))).await;
    assert_eq!(code, 201, "{got:#}");
    let obj = |name: &str, value: String| {
        json!({"apiVersion": "cel.example.com/v1", "kind": "MANY",
        "metadata": {"name": name}, "spec": {"name": value}})
    };
    let (code, got) = send(
        &client,
        "POST",
        "/apis/cel.example.com/v1/namespaces/default/manys",
        &obj("ok", "x".into()),
    )
    .await;
    assert_eq!(code, 201, "{got:#}");
    let (code, got) = send(
        &client,
        "POST",
        "/apis/cel.example.com/v1/namespaces/default/manys",
        &obj("bad", "x".repeat(150)),
    )
    .await;
    assert_eq!(code, 422, "{got:#}");
    assert_eq!(first_cause(&got), "Invalid value: \"string\": not 150");
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
}
