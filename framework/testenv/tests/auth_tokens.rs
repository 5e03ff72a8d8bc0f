//! Authentication end to end over HTTP: static tokens, ServiceAccounts and their TokenRequest
//! tokens (expiry, deletion, audiences), anonymous requests, TokenReview, the access reviews in
//! AlwaysAllow mode, discovery of the auth APIs, the request log's user, and `kubectl create
//! token` and `kubectl auth can-i` over plain HTTP.

mod auth_support;

use std::time::Duration;

use auth_support::{Kubectl, send};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::{Api, PostParams};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

async fn review(env: &TestEnv, token: &str) -> Value {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
    let (code, v) = send(
        env,
        Some(env.admin_token()),
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        Some(body),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    v["status"].clone()
}

#[tokio::test]
async fn static_tokens_authenticate_and_the_log_records_the_user() {
    let env = TestEnv::builder()
        .static_token("alice-token", "alice", "uid-1", &["devs"])
        .start()
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(env.client_with_token("alice-token"));
    nodes.list(&Default::default()).await.unwrap();
    let status = review(&env, "alice-token").await;
    assert_eq!(
        status,
        json!({"authenticated": true, "user": {"username": "alice", "uid": "uid-1", "groups": ["devs", "system:authenticated"]},
               "audiences": ["https://kubernetes.default.svc.cluster.local"]})
    );
    let (code, _) = send(&env, None, "GET", "/api/v1/nodes", None).await;
    assert_eq!(code, 200, "AlwaysAllow lets anonymous callers in");
    let users: Vec<(String, String)> = env
        .requests()
        .into_iter()
        .map(|r| (r.verb, r.user))
        .collect();
    assert_eq!(
        users,
        [
            ("list".to_string(), "alice".to_string()),
            ("create".to_string(), kube_testenv::ADMIN_USER.to_string()),
            ("list".to_string(), "system:anonymous".to_string()),
        ]
    );
}

#[tokio::test]
async fn a_bad_token_is_401_and_an_empty_bearer_is_anonymous() {
    let env = TestEnv::start().await.unwrap();
    let (code, v) = send(&env, Some("nope"), "GET", "/api/v1/nodes", None).await;
    assert_eq!((code, v["reason"].as_str()), (401, Some("Unauthorized")));
    assert_eq!(
        env.requests()[0].user,
        "",
        "an unauthenticated request has no user"
    );
    let status = review(&env, "nope").await;
    assert_eq!(status, json!({"user": {}, "error": "invalid bearer token"}));
    let (code, v) = send(
        &env,
        Some(env.admin_token()),
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}})),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        v["message"],
        "token is required for TokenReview in authentication"
    );
    let (code, v) = send(
        &env,
        Some(env.admin_token()),
        "GET",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        None,
    )
    .await;
    assert_eq!(
        (code, v["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
}

#[tokio::test]
async fn token_requests_mint_service_account_tokens() {
    let env = TestEnv::start().await.unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(env.client(), "kube-system");
    let sa = sas
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "node-controller"}})).unwrap(),
        )
        .await
        .unwrap();
    let path = "/api/v1/namespaces/kube-system/serviceaccounts/node-controller/token";
    let body = |secs: i64| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": secs}});
    let (code, v) = send(
        &env,
        Some(env.admin_token()),
        "POST",
        path,
        Some(body(7200)),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["spec"]["expirationSeconds"], 7200);
    let expires: jiff::Timestamp = v["status"]["expirationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let left = expires.as_second() - jiff::Timestamp::now().as_second();
    assert!((7190..=7200).contains(&left), "expires in {left}s");
    let token = v["status"]["token"].as_str().unwrap().to_string();
    let status = review(&env, &token).await;
    assert_eq!(
        status["user"],
        json!({"username": "system:serviceaccount:kube-system:node-controller",
               "uid": sa.metadata.uid.unwrap(),
               "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]})
    );
    let nodes: Api<Node> = Api::all(env.client_with_token(&token));
    nodes.list(&Default::default()).await.unwrap();
    assert_eq!(
        env.requests().last().unwrap().user,
        "system:serviceaccount:kube-system:node-controller"
    );

    let (code, v) = send(&env, Some(env.admin_token()), "POST", path, Some(body(10))).await;
    assert_eq!(code, 422);
    assert_eq!(
        v["message"],
        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 10: may not specify a duration less than 10 minutes"
    );
    let missing = "/api/v1/namespaces/kube-system/serviceaccounts/nobody/token";
    let (code, v) = send(
        &env,
        Some(env.admin_token()),
        "POST",
        missing,
        Some(body(3600)),
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(v["message"], "serviceaccounts \"nobody\" not found");

    // A token for another audience does not authenticate against the API server.
    let (code, v) = send(
        &env,
        Some(env.admin_token()),
        "POST",
        path,
        Some(json!({"spec": {"audiences": ["vault"]}})),
    )
    .await;
    assert_eq!(
        (code, v["spec"]["expirationSeconds"].as_i64()),
        (201, Some(3600))
    );
    let vault = v["status"]["token"].as_str().unwrap();
    let (code, _) = send(&env, Some(vault), "GET", "/api/v1/nodes", None).await;
    assert_eq!(code, 401);

    // Deleting the ServiceAccount revokes its tokens.
    sas.delete("node-controller", &Default::default())
        .await
        .unwrap();
    let (code, _) = send(&env, Some(&token), "GET", "/api/v1/nodes", None).await;
    assert_eq!(code, 401);
}

#[tokio::test]
async fn tokens_expire_on_the_tokio_clock() {
    let env = TestEnv::start().await.unwrap();
    let token = env.token_for_service_account("default", "ci").unwrap();
    let (code, _) = send(&env, Some(&token), "GET", "/api/v1/nodes", None).await;
    assert_eq!(code, 200);
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(3599)).await;
    tokio::time::resume();
    let (code, _) = send(&env, Some(&token), "GET", "/api/v1/nodes", None).await;
    assert_eq!(code, 200, "still valid a second before expiry");
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(1)).await;
    tokio::time::resume();
    let (code, _) = send(&env, Some(&token), "GET", "/api/v1/nodes", None).await;
    assert_eq!(code, 401, "expired after expirationSeconds");
    let err = env
        .token_for_service_account("no-such-namespace", "ci")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "minting a token for ServiceAccount no-such-namespace/ci: namespaces \"no-such-namespace\" not found"
    );
}

#[tokio::test]
async fn access_reviews_allow_everything_without_enforcement() {
    let env = TestEnv::start().await.unwrap();
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "nobody", "resourceAttributes": {"verb": "delete", "resource": "nodes"}}});
    let (code, v) = send(
        &env,
        Some(env.admin_token()),
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        Some(sar),
    )
    .await;
    assert_eq!((code, &v["status"]), (201, &json!({"allowed": true})));
    let (code, v) = send(
        &env,
        Some(env.admin_token()),
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        Some(json!({"spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}})),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        v["message"],
        "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
    );
}

#[tokio::test]
async fn discovery_lists_the_auth_apis() {
    let env = TestEnv::start().await.unwrap();
    let admin = Some(env.admin_token());
    let (_, core) = send(&env, admin, "GET", "/api/v1", None).await;
    let names: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(names.contains(&"serviceaccounts") && names.contains(&"serviceaccounts/token"));
    let (_, authn) = send(&env, admin, "GET", "/apis/authentication.k8s.io/v1", None).await;
    assert_eq!(
        authn["resources"],
        json!([{"name": "tokenreviews", "singularName": "", "namespaced": false, "kind": "TokenReview", "verbs": ["create"]}])
    );
    let (_, authz) = send(&env, admin, "GET", "/apis/authorization.k8s.io/v1", None).await;
    let names: Vec<&str> = authz["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "subjectaccessreviews",
            "selfsubjectaccessreviews",
            "localsubjectaccessreviews",
            "selfsubjectrulesreviews"
        ]
    );
}

#[tokio::test]
async fn kubectl_creates_tokens_and_asks_can_i() {
    let env = TestEnv::start().await.unwrap();
    let kubectl = Kubectl::new(&env);
    // `kubectl create serviceaccount` sends the ServiceAccount as protobuf.
    let (ok, _, err) = kubectl.run(&["create", "serviceaccount", "builder"]).await;
    assert!(ok, "{err}");
    if !kubectl.has_create_token().await {
        return;
    }
    let (ok, token, err) = kubectl
        .run(&["create", "token", "builder", "--duration", "20m"])
        .await;
    assert!(ok, "{err}");
    let status = review(&env, &token).await;
    assert_eq!(
        status["user"]["username"],
        "system:serviceaccount:default:builder"
    );
    // client-go sends credentials over TLS only, so over this plain-HTTP server kubectl is
    // `system:anonymous` whatever its kubeconfig says.
    assert!(
        env.requests().iter().any(|r| r.verb == "create"
            && r.subresource.as_deref() == Some("token")
            && r.user == "system:anonymous"),
        "{:?}",
        env.requests()
    );
    let (ok, out, err) = kubectl.run(&["auth", "can-i", "delete", "nodes"]).await;
    assert!(ok, "{err}");
    assert_eq!(out, "yes", "AlwaysAllow without enforcement");
}
