//! CRDs whose CEL rules the server refuses, through a real `kube::Client`: the refusals captured
//! from a v1.23 server replayed (rules that do not compile, a rule that is no bool), with the
//! one difference newer servers print, upstream's internal `ValidationRule` having grown fields
//! (`MessageExpression`, `Reason`, `FieldPath`, `OptionalOldSelf`) that `%#v` shows; and what
//! only newer servers check (the estimated cost, a transition rule below a list whose items do
//! not correlate, a `messageExpression` that is no string, malformed entries).

mod support;

use http_body_util::BodyExt;
use kube_testenv::TestEnv;
use serde_json::{Value, json};
use support::capture::parse;

async fn post_crd(client: &kube::Client, body: String) -> (u16, Value) {
    let req = http::Request::post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body.into_bytes()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap())
}

/// `ValidationRule{Rule:"r", Message:"m"}` as newer servers print it.
fn newer_rule_struct(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(", Message:\"") {
        let (head, tail) = rest.split_at(at);
        out.push_str(head);
        let close = tail.find("\"}").unwrap();
        out.push_str(&tail[..close + 1]);
        out.push_str(", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}");
        rest = &tail[close + 2..];
    }
    out.push_str(rest);
    out
}

fn rewrite(v: &mut Value) {
    match v {
        Value::String(s) => *s = newer_rule_struct(s),
        Value::Array(a) => a.iter_mut().for_each(rewrite),
        Value::Object(m) => m.values_mut().for_each(rewrite),
        _ => {}
    }
}

#[tokio::test]
async fn refused_rules_match_a_real_apiserver() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    for name in ["cel-crd-compile-error", "cel-crd-not-bool"] {
        let cap = parse(&format!("cel/{name}"));
        let (code, got) = post_crd(&client, cap.body.clone().unwrap()).await;
        let mut want = cap.response.clone();
        rewrite(&mut want);
        assert_eq!(code, cap.code, "{name}: {got:#}");
        assert_eq!(got, want, "{name}:\n got {got:#}\nwant {want:#}");
    }
    // v1.23 did not estimate cost; newer servers refuse this rule (three unbounded lists deep).
    let cap = parse("cel/cel-crd-cost-exceeded");
    let (code, got) = post_crd(&client, cap.body.clone().unwrap()).await;
    assert_eq!(code, 422, "{got:#}");
    assert_eq!(
        causes(&got),
        [
            "spec.validation.openAPIV3Schema.properties[spec].properties[items].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
            "spec.validation.openAPIV3Schema.properties[spec].properties[items].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            "spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        ]
    );
    // v1.23 had neither isURL nor transition rules; newer servers take both.
    let cap = parse("cel/cel-crd-isurl-oldself-1.23");
    let (code, got) = post_crd(&client, cap.body.clone().unwrap()).await;
    assert_eq!(code, 201, "{got:#}");
}

fn crd(name: &str, spec_schema: Value) -> String {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{name}s.cel.example.com")},
        "spec": {"group": "cel.example.com", "scope": "Namespaced",
            "names": {"plural": format!("{name}s"), "kind": name.to_uppercase()},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}}}]}})
    .to_string()
}

fn causes(status: &Value) -> Vec<String> {
    status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn newer_checks_refuse_what_newer_servers_refuse() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let (code, got) = post_crd(
        &client,
        crd(
            "lister",
            json!({"type": "object", "properties": {"tags": {"type": "array", "maxItems": 10,
                "items": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 10}},
                    "x-kubernetes-validations": [{"rule": "self.a == oldSelf.a"}]}}}}),
        ),
    )
    .await;
    assert_eq!(code, 422, "{got:#}");
    assert_eq!(
        causes(&got),
        [
            "spec.validation.openAPIV3Schema.properties[spec].properties[tags].items.x-kubernetes-validations[0].rule: Invalid value: \"self.a == oldSelf.a\": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.validation.openAPIV3Schema.properties[spec].properties[tags]"
        ]
    );
    let (code, got) = post_crd(
        &client,
        crd(
            "messager",
            json!({"type": "object", "properties": {"a": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.a > 0", "messageExpression": "self.a"}]}),
        ),
    )
    .await;
    assert_eq!(code, 422, "{got:#}");
    assert_eq!(
        causes(&got),
        [
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].messageExpression: Invalid value: apiextensions.ValidationRule{Rule:\"self.a > 0\", Message:\"\", MessageExpression:\"self.a\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: messageExpression must evaluate to a string"
        ]
    );
    // A malformed entry is a schema error (and then no rule is compiled, so the bad rule below
    // it is not reported).
    let (code, got) = post_crd(
        &client,
        crd(
            "shaper",
            json!({"type": "object", "x-kubernetes-validations": [
                {"rule": "true &&\ntrue"}, {"rule": "self.nope"}]}),
        ),
    )
    .await;
    assert_eq!(code, 422, "{got:#}");
    assert_eq!(
        causes(&got),
        [
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].message: Required value: message must be specified if rule contains line breaks"
        ]
    );
    // Without bounds, one comparison of unbounded strings for each of the items that fit in a
    // request is over the budget.
    let unbounded = crd(
        "unbounded",
        json!({"type": "object", "properties": {"tags": {"type": "array",
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
            "items": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "self.b == oldSelf.b"}]}}}}),
    );
    let (code, got) = post_crd(&client, unbounded).await;
    assert_eq!(code, 422, "{got:#}");
    assert!(causes(&got)[0].ends_with("Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"), "{got:#}");
    // The same list as a map list correlates its items: the rule is taken.
    let (code, got) = post_crd(
        &client,
        crd(
            "mapper",
            json!({"type": "object", "properties": {"tags": {"type": "array", "maxItems": 10,
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
                "items": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}, "b": {"type": "string", "maxLength": 10}},
                    "x-kubernetes-validations": [{"rule": "self.b == oldSelf.b", "message": "b is immutable"}]}}}}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{got:#}");
}
