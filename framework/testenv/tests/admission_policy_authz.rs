//! The `authorizer` of admission's CEL over HTTP with a real `kube::Client`: a policy and a
//! webhook match condition that use it are accepted at creation, as kube-apiserver 1.30+
//! accepts them, and their checks are answered by kube-testenv's RBAC for the user who writes
//! (or the ServiceAccount `serviceAccount` names), or allow everything when RBAC is off.

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

const POLICY: &str = "authz.example.com";

/// A policy on ConfigMaps: the writer may read Deployments in the namespace; its own request
/// is allowed by RBAC with a reason and no error; ServiceAccount `default/auditor` may not
/// list Secrets; anyone the writer is may `get /healthz`.
fn policy() -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": POLICY},
    "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["configmaps"]}]},
        "variables": [{"name": "own",
            "expression": "authorizer.requestResource.check('create')"}],
        "validations": [
            {"expression": "authorizer.group('apps').resource('deployments').namespace(object.metadata.namespace).check('get').allowed()",
             "message": "the writer cannot read deployments"},
            {"expression": "variables.own.allowed() && variables.own.reason().startsWith('RBAC: allowed by ') && !variables.own.errored() && variables.own.error() == ''",
             "messageExpression": "'own check: ' + variables.own.reason()"},
            {"expression": "!authorizer.serviceAccount('default', 'auditor').group('').resource('secrets').namespace('default').check('list').allowed()",
             "message": "the auditor may list secrets"},
            {"expression": "authorizer.path('/healthz').check('get').allowed()",
             "message": "the writer cannot get /healthz"}
        ]}})
}

fn binding() -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "authz-binding.example.com"},
        "spec": {"policyName": POLICY, "validationActions": ["Deny"]}})
}

async fn post<K>(api: &Api<K>, v: Value) -> Result<K, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &obj).await
}

async fn raw(env: &TestEnv, path: &str, body: Value) -> (u16, Value) {
    let req = http::Request::post(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .unwrap();
    let resp = env.client().send(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Grants `verbs` on `resources` of `group` in `default` to ServiceAccount `default/sa`.
async fn grant(admin: &kube::Client, name: &str, group: &str, resources: &str, verbs: Value) {
    let roles: Api<Role> = Api::namespaced(admin.clone(), "default");
    post(
        &roles,
        json!({"metadata": {"name": name},
        "rules": [{"apiGroups": [group], "resources": [resources], "verbs": verbs}]}),
    )
    .await
    .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "default");
    post(
        &bindings,
        json!({"metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": "default"}]}),
    )
    .await
    .unwrap();
}

fn configmap(name: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "default"}})
}

#[tokio::test]
async fn authorizer_checks_are_answered_by_rbac_for_the_writer() {
    let env = TestEnv::builder()
        .authorization(true)
        .start()
        .await
        .unwrap();
    let admin = env.client();
    let (code, p) = raw(
        &env,
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        policy(),
    )
    .await;
    assert_eq!(code, 201, "{p}");
    assert_eq!(
        p["spec"]["validations"][0]["message"],
        "the writer cannot read deployments"
    );
    let (code, b) = raw(
        &env,
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        binding(),
    )
    .await;
    assert_eq!(code, 201, "{b}");

    grant(&admin, "cm-writer", "", "configmaps", json!(["create"])).await;
    let token = env.token_for_service_account("default", "writer").unwrap();
    let writer: Api<ConfigMap> = Api::namespaced(env.client_with_token(&token), "default");
    let refused = post(&writer, configmap("first")).await.unwrap_err();
    let cause = format!(
        "ValidatingAdmissionPolicy '{POLICY}' with binding 'authz-binding.example.com' denied request: the writer cannot read deployments"
    );
    match refused {
        kube::Error::Api(s) => {
            assert_eq!(
                (s.code, s.message),
                (422, format!("configmaps \"first\" is forbidden: {cause}"))
            );
        }
        other => panic!("{other:?}"),
    }

    grant(
        &admin,
        "deploy-reader",
        "apps",
        "deployments",
        json!(["get"]),
    )
    .await;
    post(&writer, configmap("second")).await.unwrap();

    grant(&admin, "wrong-grant", "", "secrets", json!(["list"])).await;
    let sa_binding: Api<RoleBinding> = Api::namespaced(admin.clone(), "default");
    post(
        &sa_binding,
        json!({"metadata": {"name": "auditor-secrets"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "wrong-grant"},
        "subjects": [{"kind": "ServiceAccount", "name": "auditor", "namespace": "default"}]}),
    )
    .await
    .unwrap();
    let refused = post(&writer, configmap("third")).await.unwrap_err();
    assert!(
        refused.to_string().contains("the auditor may list secrets"),
        "{refused}"
    );

    // The admin (system:masters) passes every check but the auditor's, which is not theirs.
    let as_admin: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    let refused = post(&as_admin, configmap("fourth")).await.unwrap_err();
    assert!(refused.to_string().contains("own check:"), "{refused}");
}

#[tokio::test]
async fn without_rbac_every_check_is_allowed() {
    let env = TestEnv::start().await.unwrap();
    let mut p = policy();
    // Without RBAC there is no reason to give, and the auditor may do anything.
    p["spec"]["validations"] = json!([
        {"expression": "authorizer.group('apps').resource('deployments').check('delete').allowed() && authorizer.requestResource.check('create').reason() == ''"},
        {"expression": "authorizer.serviceAccount('default', 'auditor').group('').resource('secrets').check('list').allowed()"}
    ]);
    let (code, p) = raw(
        &env,
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        p,
    )
    .await;
    assert_eq!(code, 201, "{p}");
    let (code, _) = raw(
        &env,
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        binding(),
    )
    .await;
    assert_eq!(code, 201);
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    post(&cms, configmap("allowed")).await.unwrap();
}

#[tokio::test]
async fn webhook_match_conditions_may_ask_the_authorizer() {
    let env = TestEnv::start().await.unwrap();
    let config = |name: &str, condition: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{"name": format!("hook.{name}.example.com"),
                "clientConfig": {"url": "https://127.0.0.1:1/validate"},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
                "objectSelector": {"matchLabels": {"t": name}},
                "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "matchConditions": [{"name": "authz", "expression": condition}]}]})
    };
    let path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
    let (code, v) = raw(
        &env,
        path,
        config(
            "skipped",
            "!authorizer.path('/healthz').check('get').allowed()",
        ),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    let (code, v) = raw(
        &env,
        path,
        config(
            "called",
            "authorizer.requestResource.subresource('').check('create').allowed()",
        ),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let labelled = |name: &str| json!({"metadata": {"name": name, "labels": {"t": name}}});
    post(&cms, labelled("skipped")).await.unwrap();
    let err = post(&cms, labelled("called")).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("failed calling webhook \"hook.called.example.com\""),
        "{err}"
    );
}
