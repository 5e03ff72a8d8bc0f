//! OpenAPI and field validation over HTTP: `kubectl explain` of a built-in type, `kubectl
//! create -f` of a `v1 List` with client-side validation on, `--validate=strict` rejecting an
//! unknown field with upstream's message, the v3 document's shape, and `fieldValidation`
//! Strict / Warn / Ignore through a `kube::Client` for built-in and custom resources.

mod support;

use std::time::Instant;

use http::{HeaderMap, Request};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_testenv::TestEnv;
use serde_json::{Value, json};
use support::kubectl::Kubectl;

/// Sends one request; returns status, headers and the JSON body.
async fn send(
    env: &TestEnv,
    method: &str,
    uri: &str,
    content_type: &str,
    body: &Value,
) -> (u16, HeaderMap, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(kube::client::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let resp = env.client().send(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = body.collect_bytes().await.unwrap();
    (
        parts.status.as_u16(),
        parts.headers,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn warnings(h: &HeaderMap) -> Vec<&str> {
    h.get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect()
}

fn node_with_unknown_fields(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "bogus": 1},
        "spec": {"foo": "x", "taints": [{"key": "k", "effect": "NoSchedule", "colour": "red"}]}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explains_validates_lists_and_rejects_unknown_fields() {
    let t0 = Instant::now();
    let env = TestEnv::start().await.unwrap();
    eprintln!("TestEnv::start() took {:?}", t0.elapsed());
    let k = Kubectl::new(&env);

    let t0 = Instant::now();
    let explained = k.run(&["explain", "node.spec"]).await;
    eprintln!(
        "first kubectl explain (schemas generated) took {:?}",
        t0.elapsed()
    );
    assert!(explained.contains("KIND:       Node"), "{explained}");
    assert!(explained.contains("FIELD: spec <NodeSpec>"), "{explained}");
    for field in [
        "podCIDR\t<string>",
        "providerID\t<string>",
        "taints\t<[]Taint>",
        "unschedulable\t<boolean>",
    ] {
        assert!(explained.contains(field), "no {field:?} in {explained}");
    }
    let explained = k.run(&["explain", "lease.spec.holderIdentity"]).await;
    assert!(
        explained.contains("FIELD: holderIdentity <string>"),
        "{explained}"
    );

    let list = k.write(
        "list.json",
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}, "data": {"x": "1"}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
        ]})
        .to_string(),
    );
    let out = k.run(&["create", "-f", list.to_str().unwrap()]).await;
    assert_eq!(out.trim(), "configmap/a created\nnamespace/team created");
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    assert_eq!(cms.get("a").await.unwrap().data.unwrap()["x"], "1");

    // An item with an unknown field: refused, nothing created.
    let bad_list = k.write(
        "bad-list.json",
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "default"}, "dat": {"x": "1"}}
        ]})
        .to_string(),
    );
    let (ok, _, err) = k
        .try_run(&["create", "-f", bad_list.to_str().unwrap()])
        .await;
    assert!(!ok);
    assert!(
        err.contains(r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "dat""#),
        "{err}"
    );
    assert!(cms.get_opt("b").await.unwrap().is_none());

    let node = k.write(
        "node.json",
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"foo": 1}}).to_string(),
    );
    let (ok, _, err) = k
        .try_run(&["create", "--validate=strict", "-f", node.to_str().unwrap()])
        .await;
    assert!(!ok);
    assert!(
        err.contains(r#"Error from server (BadRequest): error when creating"#)
            && err.contains(r#"Node in version "v1" cannot be handled as a Node: strict decoding error: unknown field "spec.foo""#),
        "{err}"
    );
    // --validate=false (fieldValidation=Ignore) stores the object as sent.
    k.run(&["create", "--validate=false", "-f", node.to_str().unwrap()])
        .await;
}

#[tokio::test]
async fn v3_documents_carry_generated_schemas_in_upstreams_shape() {
    let env = TestEnv::start().await.unwrap();
    let get = |uri: &'static str| {
        let client = env.client();
        async move {
            let req = Request::get(uri).body(Vec::new()).unwrap();
            serde_json::from_str::<Value>(&client.request_text(req).await.unwrap()).unwrap()
        }
    };
    let core = get("/openapi/v3/api/v1").await;
    let schemas = &core["components"]["schemas"];
    let node = &schemas["io.k8s.api.core.v1.Node"];
    assert_eq!(
        node["x-kubernetes-group-version-kind"],
        json!([{"group": "", "kind": "Node", "version": "v1"}])
    );
    assert_eq!(
        node["properties"]["spec"]["allOf"],
        json!([{"$ref": "#/components/schemas/io.k8s.api.core.v1.NodeSpec"}])
    );
    assert_eq!(
        schemas["io.k8s.api.core.v1.NodeSpec"]["properties"]["taints"]["items"],
        json!({"$ref": "#/components/schemas/io.k8s.api.core.v1.Taint"})
    );
    assert!(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
    let leases = get("/openapi/v3/apis/coordination.k8s.io/v1").await;
    assert!(leases["components"]["schemas"]["io.k8s.api.coordination.v1.Lease"]["x-kubernetes-group-version-kind"].is_array());
    let v2 = get("/openapi/v2").await;
    assert_eq!(v2["swagger"], "2.0");
}

#[tokio::test]
async fn field_validation_strict_warn_and_ignore_for_built_in_types() {
    let env = TestEnv::start().await.unwrap();
    let ct = "application/json";

    let (code, _, status) = send(
        &env,
        "POST",
        "/api/v1/nodes?fieldValidation=Strict",
        ct,
        &node_with_unknown_fields("n1"),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        r#"Node in version "v1" cannot be handled as a Node: strict decoding error: unknown field "metadata.bogus", unknown field "spec.foo", unknown field "spec.taints[0].colour""#
    );

    // Warn is the default: stored, one Warning header per field.
    let (code, headers, _) = send(
        &env,
        "POST",
        "/api/v1/nodes",
        ct,
        &node_with_unknown_fields("n1"),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings(&headers),
        [
            r#"299 - "unknown field \"metadata.bogus\"""#,
            r#"299 - "unknown field \"spec.foo\"""#,
            r#"299 - "unknown field \"spec.taints[0].colour\"""#,
        ]
    );
    let (code, headers, _) = send(
        &env,
        "POST",
        "/api/v1/nodes?fieldValidation=Ignore",
        ct,
        &node_with_unknown_fields("n2"),
    )
    .await;
    assert_eq!(code, 201);
    assert!(warnings(&headers).is_empty());

    // A clean object gets no warning; map-valued fields (labels) take any key.
    let clean = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"any": "x"}}, "data": {"k": "v"}});
    let (code, headers, _) = send(
        &env,
        "POST",
        "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
        ct,
        &clean,
    )
    .await;
    assert_eq!(code, 201);
    assert!(warnings(&headers).is_empty());

    // Update: the same 400.
    let mut cm = clean.clone();
    cm["extra"] = json!(true);
    let (code, _, status) = send(
        &env,
        "PUT",
        "/api/v1/namespaces/default/configmaps/c?fieldValidation=Strict",
        ct,
        &cm,
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "extra""#
    );

    // Patch: the fields a merge or strategic patch sets; a 422 on `patch`, as upstream.
    let patch = json!({"spec": {"podCIDRz": "10.0.0.0/24"}});
    let (code, _, status) = send(
        &env,
        "PATCH",
        "/api/v1/nodes/n2?fieldValidation=Strict",
        "application/strategic-merge-patch+json",
        &patch,
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .ends_with(r#": strict decoding error: unknown field "spec.podCIDRz""#),
        "{status}"
    );
    let (code, headers, _) = send(
        &env,
        "PATCH",
        "/api/v1/nodes/n2",
        "application/merge-patch+json",
        &patch,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        warnings(&headers),
        [r#"299 - "unknown field \"spec.podCIDRz\"""#]
    );
    // Strategic-merge directives and deletions are not fields.
    let directives =
        json!({"metadata": {"$setElementOrder/finalizers": []}, "spec": {"gone": null}});
    let (code, headers, _) = send(
        &env,
        "PATCH",
        "/api/v1/nodes/n2?fieldValidation=Strict",
        "application/strategic-merge-patch+json",
        &directives,
    )
    .await;
    assert_eq!(code, 200);
    assert!(warnings(&headers).is_empty());

    let (code, _, status) = send(
        &env,
        "POST",
        "/api/v1/nodes?fieldValidation=Loose",
        ct,
        &clean,
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose": supported values: "", "Ignore", "Strict", "Warn""#
    );
}

#[tokio::test]
async fn field_validation_reports_what_pruning_would_drop_for_custom_resources() {
    let env = TestEnv::start().await.unwrap();
    let ct = "application/json";
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {
                    "size": {"type": "integer"},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }}}]}
    });
    let (code, _, _) = send(
        &env,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        ct,
        &crd,
    )
    .await;
    assert_eq!(code, 201);
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "b"}, "colour": 1},
        "spec": {"size": 1, "colour": "red", "free": {"anything": 1}}});
    let (code, _, status) = send(
        &env,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets?fieldValidation=Strict",
        ct,
        &widget,
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        r#"Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "metadata.colour", unknown field "spec.colour""#
    );
    let (code, headers, stored) = send(
        &env,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        ct,
        &widget,
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings(&headers),
        [
            r#"299 - "unknown field \"metadata.colour\"""#,
            r#"299 - "unknown field \"spec.colour\"""#
        ]
    );
    assert_eq!(
        stored["spec"],
        json!({"size": 1, "free": {"anything": 1}}),
        "pruned as before"
    );

    // The published schema has ObjectMeta for `metadata`, as apiextensions-apiserver's.
    let k = Kubectl::new(&env);
    let explained = k.run(&["explain", "widgets.metadata"]).await;
    assert!(
        explained.contains("FIELD: metadata <ObjectMeta>"),
        "{explained}"
    );
    assert!(
        explained.contains("labels\t<map[string]string>"),
        "{explained}"
    );
    let explained = k.run(&["explain", "widgets.spec"]).await;
    assert!(explained.contains("size\t<integer>"), "{explained}");
}
