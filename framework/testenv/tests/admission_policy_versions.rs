//! `matchPolicy: Equivalent` over HTTP with a real `kube::Client`: a write through `v1alpha1`
//! of a custom resource whose policy (or webhook) rule names `v1` is seen by the policy's
//! expressions, and by the webhook's `matchConditions`, as the `v1` object upstream converts
//! it to, with `request.kind` and `request.resource` the matched version's.

use http_body_util::BodyExt;
use kube_testenv::TestEnv;
use serde_json::{Value, json};

const GADGETS_V1ALPHA1: &str = "/apis/ex.example.com/v1alpha1/namespaces/default/gadgets";

async fn post(env: &TestEnv, path: &str, body: Value) -> (u16, Value) {
    let req = http::Request::post(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .unwrap();
    let resp = env.client().send(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Gadgets, served as `v1alpha1` and `v1` (stored), converted by `strategy: None`.
async fn gadgets(env: &TestEnv) {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.ex.example.com"},
        "spec": {"group": "ex.example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false, "schema": schema},
                {"name": "v1", "served": true, "storage": true, "schema": schema}]}});
    let (code, v) = post(
        env,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd,
    )
    .await;
    assert_eq!(code, 201, "{v}");
}

fn gadget(name: &str, size: i64) -> Value {
    json!({"apiVersion": "ex.example.com/v1alpha1", "kind": "Gadget",
        "metadata": {"name": name, "labels": {"t": name}}, "spec": {"size": size}})
}

#[tokio::test]
async fn a_policy_sees_the_version_its_rule_named() {
    let env = TestEnv::start().await.unwrap();
    gadgets(&env).await;
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["ex.example.com"],
                "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["gadgets"]}]},
            "validations": [
                {"expression": "object.apiVersion == 'ex.example.com/v1' && request.kind.version == 'v1' && request.resource.version == 'v1' && request.requestKind.version == 'v1alpha1' && request.requestResource.version == 'v1alpha1'",
                 "messageExpression": "'saw ' + object.apiVersion + ' as ' + request.kind.version"},
                {"expression": "object.spec.size < 10", "message": "too big"}]}});
    let (code, v) = post(
        &env,
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        policy,
    )
    .await;
    assert_eq!(code, 201, "{v}");
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "gadgets-binding.example.com"},
        "spec": {"policyName": "gadgets.example.com", "validationActions": ["Deny"]}});
    let (code, v) = post(
        &env,
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        binding,
    )
    .await;
    assert_eq!(code, 201, "{v}");

    let (code, v) = post(&env, GADGETS_V1ALPHA1, gadget("small", 1)).await;
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["apiVersion"], "ex.example.com/v1alpha1");
    let (code, v) = post(&env, GADGETS_V1ALPHA1, gadget("big", 20)).await;
    assert_eq!(code, 422, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .ends_with("denied request: too big"),
        "{v}"
    );
}

#[tokio::test]
async fn webhook_match_conditions_see_the_object_the_webhook_would_be_sent() {
    let env = TestEnv::start().await.unwrap();
    gadgets(&env).await;
    // The webhook is unreachable and fails closed: a write it is called for is refused.
    let config = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "gadgets.example.com"},
        "webhooks": [{"name": "gadgets.wh.example.com",
            "clientConfig": {"url": "https://127.0.0.1:1/validate"},
            "rules": [{"operations": ["CREATE"], "apiGroups": ["ex.example.com"], "apiVersions": ["v1"], "resources": ["gadgets"]}],
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "matchConditions": [{"name": "only-unconverted",
                "expression": "object.apiVersion != 'ex.example.com/v1' || object.spec.size > 5"}]}]});
    let (code, v) = post(
        &env,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        config,
    )
    .await;
    assert_eq!(code, 201, "{v}");
    let (code, v) = post(&env, GADGETS_V1ALPHA1, gadget("skipped", 1)).await;
    assert_eq!(code, 201, "{v}");
    let (code, v) = post(&env, GADGETS_V1ALPHA1, gadget("called", 6)).await;
    assert_eq!(code, 500, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("failed calling webhook \"gadgets.wh.example.com\""),
        "{v}"
    );
}
