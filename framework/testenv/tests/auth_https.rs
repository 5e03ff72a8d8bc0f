//! HTTPS (`Builder::https`): the generated CA is trusted by `env.client()` and the written
//! kubeconfig, client certificates it signs authenticate as CN / O, the CA is published in
//! `kube-system/extension-apiserver-authentication`, and kubectl, which sends credentials over TLS
//! only, runs as the token's user with upstream's refusals.

mod auth_support;

use auth_support::Kubectl;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::Api;
use kube_testenv::TestEnv;

async fn https_with_rbac() -> TestEnv {
    let builder = TestEnv::builder().https(true).authorization(true);
    builder.start().await.unwrap()
}

#[tokio::test]
async fn client_certificates_authenticate_as_cn_and_o() {
    let env = https_with_rbac().await;
    assert!(env.url().starts_with("https://127.0.0.1:"));
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "kube-system");
    let cm = cms.get("extension-apiserver-authentication").await.unwrap();
    assert_eq!(
        cm.data.unwrap()["client-ca-file"],
        env.ca_pem().unwrap(),
        "the client CA is published for delegating servers"
    );

    let master = env
        .config_with_client_certificate("ops", &["system:masters"])
        .unwrap();
    let nodes: Api<Node> = Api::all(kube::Client::try_from(master).unwrap());
    nodes.list(&Default::default()).await.unwrap();
    assert_eq!(env.requests().last().unwrap().user, "ops");

    let carol = env
        .config_with_client_certificate("carol", &["devs"])
        .unwrap();
    let nodes: Api<Node> = Api::all(kube::Client::try_from(carol).unwrap());
    let err = nodes.list(&Default::default()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("User \"carol\" cannot list resource \"nodes\""),
        "{err}"
    );

    let plain = TestEnv::start().await.unwrap();
    assert_eq!(
        plain.client_certificate("x", &[]).unwrap_err().to_string(),
        "client certificates need HTTPS: start the server with Builder::https(true)"
    );
}

#[tokio::test]
async fn kubectl_sends_tokens_over_https() {
    let env = https_with_rbac().await;
    let kubectl = Kubectl::new(&env);
    let (ok, out, err) = kubectl.run(&["get", "namespaces", "-o", "name"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("namespace/kube-system"), "{out}");
    assert!(
        env.requests()
            .iter()
            .any(|r| r.resource == "namespaces" && r.user == kube_testenv::ADMIN_USER)
    );
    let token = env.token_for_service_account("default", "nobody").unwrap();
    let (ok, _, err) = kubectl.run(&["--token", &token, "get", "nodes"]).await;
    assert!(!ok);
    assert_eq!(
        err,
        "Error from server (Forbidden): nodes is forbidden: User \"system:serviceaccount:default:nobody\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
    );
    // `kubectl auth can-i` and `kubectl create token` send protobuf SelfSubjectAccessReviews
    // and TokenRequests.
    let can_i = |verb: &'static str, resource: &'static str| {
        let token = token.clone();
        let kubectl = &kubectl;
        async move {
            let (ok, out, _) = kubectl
                .run(&["--token", &token, "auth", "can-i", verb, resource])
                .await;
            (ok, out)
        }
    };
    assert_eq!(can_i("list", "nodes").await, (false, "no".to_string()));
    assert_eq!(
        can_i("create", "selfsubjectaccessreviews.authorization.k8s.io").await,
        (true, "yes".to_string())
    );
    let as_nobody = ["--as", "system:serviceaccount:default:nobody"];
    let (ok, out, _) = kubectl
        .run(&[&["auth", "can-i", "get", "/healthz"][..], &as_nobody].concat())
        .await;
    assert_eq!(
        (ok, out.as_str()),
        (true, "yes"),
        "kubectl --as impersonates"
    );
    let (ok, out, _) = kubectl
        .run(&[&["auth", "can-i", "get", "nodes"][..], &as_nobody].concat())
        .await;
    assert_eq!((ok, out.as_str()), (false, "no"));
    let (ok, out, err) = kubectl
        .run(&[&["auth", "can-i", "--list"][..], &as_nobody].concat())
        .await;
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("selfsubjectaccessreviews.authorization.k8s.io")),
        "kubectl auth can-i --list shows the caller's rules: {out}"
    );
    if !kubectl.has_create_token().await {
        return;
    }
    let (ok, out, err) = kubectl
        .run(&["create", "token", "nobody", "--duration", "15m"])
        .await;
    assert!(ok, "{err}");
    let nodes: Api<Node> = Api::all(env.client_with_token(&out));
    let err = nodes.list(&Default::default()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("system:serviceaccount:default:nobody"),
        "{err}"
    );
    let minted = env
        .requests()
        .into_iter()
        .rfind(|r| r.subresource.as_deref() == Some("token"))
        .unwrap();
    assert_eq!(
        (minted.verb.as_str(), minted.status, minted.user.as_str()),
        ("create", 201, kube_testenv::ADMIN_USER)
    );
}
