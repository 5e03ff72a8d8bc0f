//! Replays the authentication and authorization requests captured from a real kube-apiserver
//! (tests/golden/*.txt, copied from the shared captures; that server ran `--authorization-mode=
//! Node,RBAC`) as the caller each capture names, and compares status and body after blanking
//! what differs on every run (uid, tokens, timestamps) and managedFields, which the create-only
//! auth APIs here do not record (kube-apiserver writes an `Update` entry even into a TokenRequest
//! answer; see the README's known differences).

mod support;

use http_body_util::BodyExt;
use kube_testenv::TestEnv;
use serde_json::Value;
use support::capture::parse;

/// The token placeholder the captures use where the real server printed a signed JWT.
const MASKED: &str = "<token: a signed ServiceAccount JWT>";

/// Blanks run-specific values; a token is masked as the captures mask it.
fn normalize(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("managedFields");
            for (k, val) in m.iter_mut() {
                match (k.as_str(), &*val) {
                    ("uid" | "expirationTimestamp", Value::String(_)) => *val = "<dynamic>".into(),
                    ("token", Value::String(_)) => *val = MASKED.into(),
                    _ => normalize(val),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(normalize),
        _ => {}
    }
}

/// Sends the capture's request with bearer `token` (none when `None`), with `sa_token` where the
/// capture masked one, compares, and returns the response body as received.
async fn replay(env: &TestEnv, name: &str, token: Option<&str>, sa_token: &str) -> Value {
    let cap = parse(name);
    let mut req = http::Request::builder()
        .method(cap.method.as_str())
        .uri(format!("{}{}", env.url(), cap.path))
        .header("content-type", "application/json");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let body = cap
        .body
        .clone()
        .unwrap_or_default()
        .replace(MASKED, sa_token);
    let client = anonymous_client(env);
    let resp = client
        .send(
            req.body(kube::client::Body::from(body.into_bytes()))
                .unwrap(),
        )
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let mut got: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    let received = got.clone();
    let mut want = cap.response;
    normalize(&mut got);
    normalize(&mut want);
    assert_eq!(code, cap.code, "{name}: status code; body {got:#}");
    assert_eq!(got, want, "{name}:\n got {got:#}\nwant {want:#}");
    received
}

/// A client that sends no credentials of its own.
fn anonymous_client(env: &TestEnv) -> kube::Client {
    kube::Client::try_from(kube::Config::new(env.url().parse().unwrap())).unwrap()
}

#[tokio::test]
async fn auth_responses_match_a_real_apiserver() {
    let env = TestEnv::builder()
        .authorization(true)
        .start()
        .await
        .unwrap();
    let admin = env.admin_token().to_string();
    let sa = env
        .token_for_service_account("default", "golden-nobody")
        .unwrap();
    replay(&env, "anonymous-forbidden-list-nodes", None, &sa).await;
    replay(&env, "bad-token-unauthorized", Some("not-a-token"), &sa).await;
    replay(&env, "rbac-forbidden-list-nodes", Some(&sa), &sa).await;
    let review = replay(&env, "tokenreview-valid", Some(&admin), &sa).await;
    assert_eq!(review["spec"]["token"], sa.as_str(), "the token is echoed");
    replay(&env, "tokenreview-invalid", Some(&admin), &sa).await;
    replay(&env, "sar-nonresource-denied", Some(&admin), &sa).await;
    replay(&env, "sar-resource-allowed", Some(&admin), &sa).await;
    let minted = replay(&env, "tokenrequest-create", Some(&admin), &sa).await;
    let token = minted["status"]["token"].as_str().unwrap();
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> =
        kube::Api::all(env.client_with_token(token));
    let err = nodes.list(&Default::default()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("system:serviceaccount:default:golden-nobody"),
        "the minted token authenticates as its ServiceAccount: {err}"
    );
}
