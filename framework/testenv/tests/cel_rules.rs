//! CRD validation rules on every kind of write, through a real `kube::Client`: create, update
//! (PUT), JSON and merge patches, server-side apply and the status subresource; transition rules
//! with and without `optionalOldSelf`; `messageExpression`, `reason` and `fieldPath`; and
//! ratcheting, where a value made invalid by a stricter CRD does not block an update that leaves
//! it alone (1.30+ servers), for rules and for the schema alike.

mod support;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

fn crd(spec_rules: Value, name_schema: Value) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.cel.example.com"},
    "spec": {"group": "cel.example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "x-kubernetes-validations": spec_rules, "properties": {
                    "size": {"type": "integer"},
                    "class": {"type": "string", "maxLength": 20,
                        "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "class is immutable"}]},
                    "name": name_schema,
                    "limits": {"type": "object", "maxProperties": 10, "additionalProperties": {"type": "integer",
                        "x-kubernetes-validations": [{"rule": "self >= 0", "messageExpression": "'limit must not be negative, got ' + string(self)"}]}}
                }},
                "status": {"type": "object", "properties": {"ready": {"type": "integer"}},
                    "x-kubernetes-validations": [{"rule": "self.ready >= 0", "reason": "FieldValueForbidden", "fieldPath": ".ready", "message": "ready must not be negative"}]}
            }}}}]}})
}

fn spec_rules() -> Value {
    json!([
        {"rule": "!has(self.size) || self.size < 10", "message": "too big"},
        {"rule": "!oldSelf.hasValue() || !has(oldSelf.value().size) || self.size >= oldSelf.value().size",
         "optionalOldSelf": true, "message": "size may only grow"}
    ])
}

async fn cluster(name_schema: Value) -> (TestEnv, Api<DynamicObject>, Api<DynamicObject>) {
    let env = TestEnv::start().await.unwrap();
    let crds = Api::<DynamicObject>::all_with(
        env.client(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let obj = serde_json::from_value(crd(spec_rules(), name_schema)).unwrap();
    crds.create(&PostParams::default(), &obj).await.unwrap();
    let widgets = Api::namespaced_with(
        env.client(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cel.example.com", "v1", "Widget"),
            "widgets",
        ),
    );
    (env, crds, widgets)
}

fn widget(spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "cel.example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": spec}))
    .unwrap()
}

fn causes(r: kube::Result<DynamicObject>) -> Vec<String> {
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
async fn rules_hold_on_every_kind_of_write() {
    let (_env, _crds, widgets) = cluster(json!({"type": "string"})).await;
    let pp = PostParams::default();
    assert_eq!(
        causes(widgets.create(&pp, &widget(json!({"size": 12}))).await),
        ["spec: Invalid value: \"object\": too big"]
    );
    let created = widgets
        .create(
            &pp,
            &widget(json!({"size": 3, "class": "a", "limits": {"cpu": 1}})),
        )
        .await
        .unwrap();
    // PUT: the transition rules see the stored object.
    let mut smaller = created.clone();
    smaller.data["spec"]["size"] = 2.into();
    smaller.data["spec"]["class"] = "b".into();
    assert_eq!(
        causes(widgets.replace("w", &pp, &smaller).await),
        [
            "spec: Invalid value: \"object\": size may only grow",
            "spec.class: Invalid value: \"string\": class is immutable"
        ]
    );
    // JSON patch and merge patch.
    let p = Patch::Json::<()>(
        serde_json::from_value(json!([{"op": "add", "path": "/spec/limits/mem", "value": -5}]))
            .unwrap(),
    );
    assert_eq!(
        causes(widgets.patch("w", &PatchParams::default(), &p).await),
        ["spec.limits[mem]: Invalid value: \"integer\": limit must not be negative, got -5"]
    );
    let p = Patch::Merge(json!({"spec": {"size": 4}}));
    widgets
        .patch("w", &PatchParams::default(), &p)
        .await
        .unwrap();
    // Server-side apply.
    let applied = json!({"apiVersion": "cel.example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"size": 11}});
    let ssa = PatchParams::apply("tester").force();
    assert_eq!(
        causes(widgets.patch("w", &ssa, &Patch::Apply(applied)).await),
        ["spec: Invalid value: \"object\": too big"]
    );
    // The status subresource: its rule, with reason and fieldPath.
    let p = Patch::Merge(json!({"status": {"ready": -1}}));
    assert_eq!(
        causes(widgets.patch_status("w", &PatchParams::default(), &p).await),
        ["status.ready: Forbidden: ready must not be negative"]
    );
    let p = Patch::Merge(json!({"status": {"ready": 1}}));
    widgets
        .patch_status("w", &PatchParams::default(), &p)
        .await
        .unwrap();
}

#[tokio::test]
async fn unchanged_invalid_values_do_not_block_updates() {
    let (_env, crds, widgets) = cluster(json!({"type": "string"})).await;
    let pp = PostParams::default();
    widgets
        .create(&pp, &widget(json!({"size": 9, "name": "UPPER-and-long"})))
        .await
        .unwrap();
    // The CRD tightens: a rule and a maxLength the stored name breaks.
    let mut stricter = crds.get("widgets.cel.example.com").await.unwrap();
    stricter.data["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["name"] = json!({"type": "string", "maxLength": 5,
            "x-kubernetes-validations": [{"rule": "self.lowerAscii() == self", "message": "lowercase only"}]});
    crds.replace("widgets.cel.example.com", &pp, &stricter)
        .await
        .unwrap();
    // An update that leaves the name alone passes; one that changes it is held to the rules.
    let p = Patch::Merge(json!({"spec": {"size": 9, "limits": {"cpu": 2}}}));
    widgets
        .patch("w", &PatchParams::default(), &p)
        .await
        .unwrap();
    let p = Patch::Merge(json!({"spec": {"name": "BAD"}}));
    assert_eq!(
        causes(widgets.patch("w", &PatchParams::default(), &p).await),
        ["spec.name: Invalid value: \"string\": lowercase only"]
    );
    // A changed value too long for the schema keeps every rule from running, as upstream's
    // strategy does (`hasBlockingErr`).
    let p = Patch::Merge(json!({"spec": {"name": "STILL-BAD"}}));
    assert_eq!(
        causes(widgets.patch("w", &PatchParams::default(), &p).await),
        [
            "spec.name: Too long: may not be more than 5 bytes",
            "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
        ]
    );
}
