//! `format`, `allOf`, `oneOf`, `anyOf` and `not` on custom resources, over HTTP with a real
//! `kube::Client`: what kube-apiserver refuses (worded as kube-openapi's validator and
//! apiextensions-apiserver word it), which of these errors keep the CEL rules from running
//! (a bad format is a type error, which does; a combinator's own error does not), and Gateway
//! API's status addresses, refused by their `oneOf`/`anyOf` of `ipv4`/`ipv6` formats.

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

mod support;

/// The cause a cluster gives when a blocking schema error keeps the rules from running.
const NOT_CHECKED: &str = "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

fn crd_api(env: &TestEnv) -> Api<DynamicObject> {
    Api::all_with(
        env.client(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    )
}

/// A cluster serving `widgets.example.com/v1` with `spec` as the schema of `.spec`.
async fn widgets(spec: Value) -> (TestEnv, Api<DynamicObject>) {
    let env = TestEnv::start().await.unwrap();
    let crd: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema":
                {"type": "object", "properties": {"spec": spec}}}}]}
    }))
    .unwrap();
    crd_api(&env)
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let api = Api::namespaced_with(env.client(), "default", &ar);
    (env, api)
}

fn widget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

/// The causes (as `field: message`) of a refused write; it must be a 422.
fn causes(r: kube::Result<DynamicObject>) -> Vec<String> {
    let status = support::api_err(r.expect_err("the write is refused"));
    assert_eq!(status.code, 422, "{status:?}");
    let causes = status.details.map(|d| d.causes).unwrap_or_default();
    causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

#[tokio::test]
async fn string_formats_are_checked_and_named_as_the_type_the_value_lacks() {
    let (_env, api) = widgets(json!({"type": "object", "properties": {
        "ip": {"type": "string", "format": "ipv4"},
        "ip6": {"type": "string", "format": "ipv6"},
        "net": {"type": "string", "format": "cidr"},
        "id": {"type": "string", "format": "uuid"},
        "at": {"type": "string", "format": "date-time"},
        "host": {"type": "string", "format": "hostname"},
        "data": {"type": "string", "format": "byte"},
        "free": {"type": "string", "format": "no-such-format"},
        "port": {"type": "integer", "format": "int32"},
        "addr": {"type": "string", "format": "ipv4"}
    }}))
    .await;
    let pp = PostParams::default();
    let good = json!({"ip": "10.0.0.1", "ip6": "fd00::1", "net": "10.0.0.0/8",
        "id": "123e4567-e89b-12d3-a456-426614174000", "at": "2024-01-02T03:04:05Z",
        "host": "a.example.com", "data": "aGVsbG8=", "free": "anything", "port": 8080,
        "addr": "192.168.1.1"});
    api.create(&pp, &widget("good", good)).await.unwrap();

    let bad = json!({"ip": "abc", "ip6": "10.0.0.1", "net": "10.0.0.0/33", "id": "123",
        "at": "yesterday", "host": "-x-", "data": "not base64!", "free": "anything",
        "port": "80", "addr": 5});
    let got = causes(api.create(&pp, &widget("bad", bad)).await);
    let fmt = |f: &str, v: &str, t: &str| {
        format!("spec.{f}: Invalid value: \"{v}\": spec.{f} in body must be of type {t}: \"{v}\"")
    };
    assert_eq!(
        got,
        [
            // A number under a string format: kube-openapi names the format and the number's
            // Go format instead of the JSON types.
            fmt("addr", "int64", "ipv4"),
            fmt("at", "yesterday", "date-time"),
            fmt("data", "not base64!", "byte"),
            fmt("host", "-x-", "hostname"),
            fmt("id", "123", "uuid"),
            fmt("ip", "abc", "ipv4"),
            fmt("ip6", "10.0.0.1", "ipv6"),
            fmt("net", "10.0.0.0/33", "cidr"),
            fmt("port", "string", "integer"),
        ]
    );
}

#[tokio::test]
async fn combinators_are_checked_with_upstreams_wording() {
    let (_env, api) = widgets(json!({"type": "object", "properties": {
        "choice": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        "either": {"type": "string", "anyOf": [{"format": "ipv4"}, {"format": "ipv6"}]},
        "both": {"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 10}]},
        "never": {"type": "string", "not": {"enum": ["forbidden"]}}
    }}))
    .await;
    let pp = PostParams::default();
    let good = json!({"choice": {"a": "x"}, "either": "fd00::1", "both": 5, "never": "fine"});
    api.create(&pp, &widget("good", good)).await.unwrap();

    let bad = json!({"choice": {}, "either": "abc", "both": 0, "never": "forbidden"});
    let combinator =
        |path: &str, what: &str| format!("<nil>: Invalid value: \"\": \"{path}\" {what}");
    assert_eq!(
        causes(api.create(&pp, &widget("bad", bad)).await),
        [
            "spec.both: Invalid value: 0: spec.both in body should be greater than or equal to 1"
                .to_string(),
            combinator("spec.both", "must validate all the schemas (allOf)"),
            combinator(
                "spec.choice",
                "must validate one and only one schema (oneOf). Found none valid"
            ),
            "spec.choice.a: Required value".to_string(),
            combinator("spec.either", "must validate at least one schema (anyOf)"),
            "spec.either: Invalid value: \"abc\": spec.either in body must be of type ipv4: \"abc\""
                .to_string(),
            combinator("spec.never", "must not validate the schema (not)"),
        ]
    );
    let two = json!({"choice": {"a": "x", "b": "y"}});
    assert_eq!(
        causes(api.create(&pp, &widget("two", two)).await),
        [combinator(
            "spec.choice",
            "must validate one and only one schema (oneOf). Found 2 valid alternatives"
        )]
    );
}

#[tokio::test]
async fn a_bad_format_keeps_the_rules_from_running_and_a_combinator_error_does_not() {
    let (_env, api) = widgets(json!({"type": "object",
    "x-kubernetes-validations": [{"rule": "self.n > 0", "message": "n must be positive"}],
    "properties": {
        "n": {"type": "integer"},
        "ip": {"type": "string", "format": "ipv4"},
        "never": {"type": "string", "not": {"enum": ["forbidden"]}}
    }}))
    .await;
    let pp = PostParams::default();
    assert_eq!(
        causes(
            api.create(&pp, &widget("fmt", json!({"n": 0, "ip": "abc"})))
                .await
        ),
        [
            "spec.ip: Invalid value: \"abc\": spec.ip in body must be of type ipv4: \"abc\"",
            NOT_CHECKED,
        ]
    );
    assert_eq!(
        causes(
            api.create(&pp, &widget("not", json!({"n": 0, "never": "forbidden"})))
                .await
        ),
        [
            "<nil>: Invalid value: \"\": \"spec.never\" must not validate the schema (not)",
            "spec: Invalid value: \"object\": n must be positive",
        ]
    );
}

#[tokio::test]
async fn a_gateway_status_address_that_is_no_ip_is_refused_by_its_any_of() {
    let env = TestEnv::start().await.unwrap();
    let crd: Value = serde_saphyr::from_str(include_str!(
        "fixtures/gateway-api/gateway.networking.k8s.io_gateways.yaml"
    ))
    .unwrap();
    let crd: DynamicObject = serde_json::from_value(crd).unwrap();
    crd_api(&env)
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "Gateway"),
        "gateways",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &ar);
    let gw: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "gw"},
        "spec": {"gatewayClassName": "c", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &gw).await.unwrap();
    let status = |addresses: Value| Patch::Merge(json!({"status": {"addresses": addresses}}));
    let pp = PatchParams::default();
    for ok in ["10.0.0.1", "fd00::1"] {
        let addresses = json!([{"type": "IPAddress", "value": ok}]);
        api.patch_status("gw", &pp, &status(addresses))
            .await
            .unwrap();
    }
    let addresses = json!([{"type": "IPAddress", "value": "abc"}]);
    let field = "status.addresses[0]";
    assert_eq!(
        causes(api.patch_status("gw", &pp, &status(addresses)).await),
        [
            format!(
                "<nil>: Invalid value: \"\": \"{field}\" must validate one and only one schema (oneOf). Found none valid"
            ),
            format!(
                "<nil>: Invalid value: \"\": \"{field}.value\" must validate at least one schema (anyOf)"
            ),
            format!(
                "{field}.value: Invalid value: \"abc\": {field}.value in body must be of type ipv4: \"abc\""
            ),
            NOT_CHECKED.to_string(),
        ]
    );
}

#[tokio::test]
async fn unchanged_values_breaking_a_new_format_or_combinator_do_not_block_updates() {
    let (env, api) = widgets(json!({"type": "object", "properties": {
        "ip": {"type": "string"}, "never": {"type": "string"}, "n": {"type": "integer"}
    }}))
    .await;
    let pp = PostParams::default();
    let stored = json!({"ip": "abc", "never": "forbidden", "n": 1});
    api.create(&pp, &widget("w", stored)).await.unwrap();
    // The CRD tightens: the stored ip is no ipv4, the stored `never` is what `not` forbids.
    let crds = crd_api(&env);
    let mut stricter = crds.get("widgets.example.com").await.unwrap();
    let props = &mut stricter.data["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        ["spec"]["properties"];
    props["ip"] = json!({"type": "string", "format": "ipv4"});
    props["never"] = json!({"type": "string", "not": {"enum": ["forbidden"]}});
    crds.replace("widgets.example.com", &pp, &stricter)
        .await
        .unwrap();
    let merge = |spec: Value| Patch::Merge(json!({"spec": spec}));
    let params = PatchParams::default();
    api.patch("w", &params, &merge(json!({"n": 2})))
        .await
        .unwrap();
    assert_eq!(
        causes(
            api.patch(
                "w",
                &params,
                &merge(json!({"ip": "xyz", "never": "forbidden"}))
            )
            .await
        ),
        ["spec.ip: Invalid value: \"xyz\": spec.ip in body must be of type ipv4: \"xyz\""]
    );
    let fresh = json!({"never": "forbidden"});
    assert_eq!(
        causes(api.create(&pp, &widget("fresh", fresh)).await),
        ["<nil>: Invalid value: \"\": \"spec.never\" must not validate the schema (not)"]
    );
}
