//! Gateway API's standard-channel CRDs (tests/fixtures/gateway-api, unmodified, with their
//! licence) installed into kube-testenv through a real `kube::Client`: every CRD is taken, all
//! 245 of its CEL rules compile within the cost budgets, and a Gateway's refusals come whole and
//! in the server's order. Every rule family on real objects: `cel_gateway_families.rs`.

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

mod support;

const CRDS: &[(&str, &str)] = &[
    (
        "gatewayclasses",
        include_str!("fixtures/gateway-api/gateway.networking.k8s.io_gatewayclasses.yaml"),
    ),
    (
        "gateways",
        include_str!("fixtures/gateway-api/gateway.networking.k8s.io_gateways.yaml"),
    ),
    (
        "grpcroutes",
        include_str!("fixtures/gateway-api/gateway.networking.k8s.io_grpcroutes.yaml"),
    ),
    (
        "httproutes",
        include_str!("fixtures/gateway-api/gateway.networking.k8s.io_httproutes.yaml"),
    ),
    (
        "referencegrants",
        include_str!("fixtures/gateway-api/gateway.networking.k8s.io_referencegrants.yaml"),
    ),
];

fn count_rules(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            let here = m
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            here + m.values().map(count_rules).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_rules).sum(),
        _ => 0,
    }
}

/// A cluster with every Gateway API CRD installed; the number of rules they hold.
async fn gateway_api() -> (TestEnv, usize) {
    let env = TestEnv::start().await.unwrap();
    let crds: Api<DynamicObject> = Api::all_with(
        env.client(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let mut rules = 0;
    for (name, yaml) in CRDS {
        let crd: Value = serde_saphyr::from_str(yaml).unwrap();
        rules += count_rules(&crd);
        let obj: DynamicObject = serde_json::from_value(crd).unwrap();
        if let Err(e) = crds.create(&PostParams::default(), &obj).await {
            panic!("{name}: {e:#?}");
        }
    }
    (env, rules)
}

fn api(env: &TestEnv, kind: &str, plural: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        env.client(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", kind),
            plural,
        ),
    )
}

fn object(kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

/// The causes of a refused write, as `field: message`.
fn refused(r: kube::Result<DynamicObject>) -> Vec<String> {
    let status = support::api_err(r.unwrap_err());
    assert_eq!(status.code, 422, "{status:?}");
    status
        .details
        .unwrap()
        .causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

#[tokio::test]
async fn every_crd_installs_and_its_rules_compile() {
    let (_env, rules) = gateway_api().await;
    assert_eq!(rules, 245);
}

#[tokio::test]
async fn gateway_rules_refuse_and_admit_real_objects() {
    let (env, _) = gateway_api().await;
    let gateways = api(&env, "Gateway", "gateways");
    let pp = PostParams::default();
    let listener = |name: &str, protocol: &str, port: u16| json!({"name": name, "protocol": protocol, "port": port});
    let ok = object(
        "Gateway",
        "ok",
        json!({"gatewayClassName": "c", "listeners": [listener("http", "HTTP", 80), listener("tcp", "TCP", 9000)]}),
    );
    gateways.create(&pp, &ok).await.unwrap();
    let mut tcp_host = listener("tcp", "TCP", 9000);
    tcp_host["hostname"] = "a.example.com".into();
    let causes = refused(
        gateways
            .create(
                &pp,
                &object(
                    "Gateway",
                    "host",
                    json!({"gatewayClassName": "c", "listeners": [tcp_host]}),
                ),
            )
            .await,
    );
    assert_eq!(
        causes,
        [
            "spec.listeners: Invalid value: \"array\": hostname must not be specified for protocols ['TCP', 'UDP']"
        ]
    );
    let causes = refused(
        gateways
            .create(
                &pp,
                &object(
                    "Gateway",
                    "twice",
                    json!({"gatewayClassName": "c", "listeners": [listener("a", "HTTP", 80), listener("a", "HTTP", 81)]}),
                ),
            )
            .await,
    );
    // The schema's list-map key refuses it first, then the rule.
    assert_eq!(
        causes,
        [
            "spec.listeners[1]: Duplicate value: map[string]interface {}{\"name\":\"a\"}",
            "spec.listeners: Invalid value: \"array\": Listener name must be unique within the Gateway"
        ]
    );
}
