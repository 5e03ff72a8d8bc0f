//! What a CRD's definition does to requests, over HTTP: CRD validation with upstream's causes,
//! name conflicts between CRDs, the structural schema on custom resources (pruning, defaults,
//! `x-kubernetes-preserve-unknown-fields`, 422 causes), and several served versions with
//! `conversion: None`.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::wait::{await_condition, conditions};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

fn crd(name: &str, spec: Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

fn version(name: &str, storage: bool, schema: Value) -> Value {
    json!({"name": name, "served": true, "storage": storage, "schema": {"openAPIV3Schema": schema}})
}

fn causes(err: kube::Error) -> Vec<String> {
    let kube::Error::Api(status) = err else {
        panic!("want an API error, got {err}");
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let body = status.details.expect("details");
    body.causes
        .into_iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

async fn established(client: &kube::Client, name: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let wait = await_condition(crds, name, conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("established")
        .unwrap();
}

#[tokio::test]
async fn invalid_crds_are_refused_with_upstreams_causes() {
    let env = TestEnv::start().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let bad = crd(
        "things.example",
        json!({
            "group": "example", "scope": "Global",
            "names": {"plural": "Things", "kind": "Thing", "listKind": "Thing"},
            "versions": [
                version("v1", true, json!({"type": "object", "properties": {"spec": {"properties": {
                    "a": {"type": "array"},
                    "d": {"type": "object", "properties": {"n": {"type": "integer", "default": "one"}}, "default": {"n": 1, "x": true}},
                    "m": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
                }}}})),
                version("V2", true, json!({"type": "string"})),
                {"name": "v3", "served": true, "storage": false}
            ]
        }),
    );
    let got = causes(crds.create(&PostParams::default(), &bad).await.unwrap_err());
    let dns1035 = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    assert_eq!(
        got,
        [
            "metadata.name: Invalid value: \"things.example\": must be spec.names.plural+\".\"+spec.group".to_string(),
            "spec.group: Invalid value: \"example\": should be a domain with at least one dot".into(),
            "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"".into(),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields".into(),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[a].items: Required value: must be specified".into(),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[d].default: Invalid value: map[string]interface {}{\"n\":1, \"x\":true}: must not have unknown fields".into(),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[d].properties[n].default: Invalid value: \"string\":  in body must be of type integer: \"string\"".into(),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[m].items.properties[name]: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property".into(),
            format!("spec.versions[1].name: Invalid value: \"V2\": {dns1035}"),
            "spec.versions[1].schema.openAPIV3Schema.type: Invalid value: \"string\": must be object at the root".into(),
            "spec.versions[2].schema.openAPIV3Schema: Required value: schemas are required".into(),
            "spec.versions: Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must have exactly one version marked as storage version".into(),
            format!("spec.names.plural: Invalid value: \"Things\": {dns1035}"),
            "spec.names.listKind: Invalid value: \"Thing\": kind and listKind may not be the same".into(),
        ]
    );
}

#[tokio::test]
async fn a_second_crd_with_taken_names_is_not_established() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    // Upstream checks plural, singular, short names, kind, list kind: distinct plurals and
    // singulars, the same kind.
    let spec = |plural: &str| {
        json!({"group": "names.example.com", "scope": "Cluster",
               "names": {"plural": plural, "singular": &plural[..plural.len() - 1], "kind": "Thing"},
               "versions": [version("v1", true, schema.clone())]})
    };
    crds.create(
        &PostParams::default(),
        &crd("things.names.example.com", spec("things")),
    )
    .await
    .unwrap();
    established(&client, "things.names.example.com").await;
    let second = crds
        .create(
            &PostParams::default(),
            &crd("others.names.example.com", spec("others")),
        )
        .await
        .unwrap();
    assert!(
        second.status.unwrap().conditions.is_none(),
        "created without conditions"
    );
    let second = crds.get("others.names.example.com").await.unwrap();
    let conds: Vec<(String, String, String, String)> = second
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| {
            (
                c.type_,
                c.status,
                c.reason.unwrap_or_default(),
                c.message.unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        conds,
        [
            (
                "NamesAccepted".into(),
                "False".into(),
                "KindConflict".into(),
                "\"Thing\" is already in use".into()
            ),
            (
                "Established".into(),
                "False".into(),
                "NotAccepted".into(),
                "not all names are accepted".into()
            ),
        ]
    );
    let list = client
        .list_api_group_resources("names.example.com/v1")
        .await
        .unwrap();
    let names: Vec<&str> = list.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["things"], "only the established CRD is served");

    // Once the first CRD is gone, the second's names are free.
    crds.delete("things.names.example.com", &Default::default())
        .await
        .unwrap();
    established(&client, "others.names.example.com").await;
    let list = client
        .list_api_group_resources("names.example.com/v1")
        .await
        .unwrap();
    let names: Vec<&str> = list.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["others"]);
}

fn gadget_schema() -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["mode"], "properties": {
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "count": {"type": "integer", "minimum": 0, "maximum": 10, "default": 2},
            "name": {"type": "string", "maxLength": 8, "pattern": "^[a-z]+$"},
            "ratio": {"type": "number", "exclusiveMaximum": true, "maximum": 1},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 3, "items": {"type": "string"}},
            "options": {"type": "object", "properties": {"debug": {"type": "boolean", "default": false}}, "default": {}},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "port": {"x-kubernetes-int-or-string": true}
        }}
    }})
}

#[tokio::test]
async fn the_structural_schema_prunes_defaults_and_validates() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let spec = json!({"group": "schema.example.com", "scope": "Namespaced",
        "names": {"plural": "gadgets", "kind": "Gadget"},
        "versions": [version("v1", true, gadget_schema())]});
    crds.create(
        &PostParams::default(),
        &crd("gadgets.schema.example.com", spec),
    )
    .await
    .unwrap();
    established(&client, "gadgets.schema.example.com").await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("schema.example.com", "v1", "Gadget"),
        "gadgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let obj = |spec: Value| -> DynamicObject {
        serde_json::from_value(
            json!({"apiVersion": "schema.example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g", "unknownMeta": 1}, "spec": spec, "topLevel": 1}),
        )
        .unwrap()
    };
    let created = api
        .create(
            &PostParams::default(),
            &obj(json!({"mode": "fast", "gone": 1, "extra": {"kept": {"deep": true}}, "port": "http"})),
        )
        .await
        .unwrap();
    assert_eq!(
        created.data,
        json!({"spec": {"mode": "fast", "count": 2, "options": {"debug": false}, "extra": {"kept": {"deep": true}}, "port": "http"}})
    );

    let err = api
        .create(
            &PostParams::default(),
            &obj(json!({"mode": "medium", "count": 11, "name": "Too-Long-Name", "ratio": 1, "tags": ["a", "a", "b", "c"], "port": true})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        causes(err),
        [
            "spec.count: Invalid value: 11: spec.count in body should be less than or equal to 10",
            "spec.mode: Unsupported value: \"medium\": supported values: \"fast\", \"slow\"",
            "spec.name: Too long: may not be more than 8 bytes",
            "spec.name: Invalid value: \"Too-Long-Name\": spec.name in body should match '^[a-z]+$'",
            "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
            "spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1",
            "spec.tags: Too many: 4: must have at most 3 items",
            "spec.tags[1]: Duplicate value: \"a\"",
        ]
    );

    // Merge patches are pruned and defaulted too; a null removes a field, defaults come back.
    let patched = api
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"count": null, "unknown": 1, "options": {"debug": true}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["count"], 2);
    assert_eq!(patched.data["spec"]["options"], json!({"debug": true}));
    assert!(patched.data["spec"].get("unknown").is_none());
    let err = api
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"mode": null}})),
        )
        .await
        .unwrap_err();
    assert_eq!(causes(err), ["spec.mode: Required value"]);
}

#[tokio::test]
async fn several_versions_share_objects_with_conversion_none() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
    let mut beta = version("v1beta1", true, schema.clone());
    beta["additionalPrinterColumns"] = json!([]);
    let spec = json!({"group": "multi.example.com", "scope": "Namespaced",
        "names": {"plural": "things", "kind": "Thing"}, "versions": [beta]});
    let name = "things.multi.example.com";
    crds.create(&PostParams::default(), &crd(name, spec.clone()))
        .await
        .unwrap();
    established(&client, name).await;
    let api_at = |v: &str| -> Api<DynamicObject> {
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("multi.example.com", v, "Thing"),
            "things",
        );
        Api::namespaced_with(client.clone(), "default", &ar)
    };
    let old: DynamicObject = serde_json::from_value(json!({"apiVersion": "multi.example.com/v1beta1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"a": 1}})).unwrap();
    api_at("v1beta1")
        .create(&PostParams::default(), &old)
        .await
        .unwrap();

    // v1 joins as the storage version; v1beta1 stays served.
    let mut spec2 = spec;
    spec2["versions"] = json!([
        version("v1beta1", false, schema.clone()),
        version("v1", true, schema)
    ]);
    let mut current = crds.get(name).await.unwrap();
    current.spec = serde_json::from_value(spec2).unwrap();
    let updated = crds
        .replace(name, &PostParams::default(), &current)
        .await
        .unwrap();
    assert_eq!(
        updated.status.unwrap().stored_versions,
        Some(vec!["v1beta1".to_string(), "v1".to_string()])
    );
    let group = client.list_api_groups().await.unwrap();
    let g = group
        .groups
        .iter()
        .find(|g| g.name == "multi.example.com")
        .unwrap();
    let versions: Vec<&str> = g.versions.iter().map(|v| v.version.as_str()).collect();
    assert_eq!(versions, ["v1", "v1beta1"]);
    assert_eq!(g.preferred_version.as_ref().unwrap().version, "v1");

    let mut watch = api_at("v1beta1")
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let v1 = api_at("v1").get("t").await.unwrap();
    assert_eq!(v1.types.unwrap().api_version, "multi.example.com/v1");
    assert_eq!(v1.data["spec"], json!({"a": 1}));
    api_at("v1")
        .patch(
            "t",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"a": 2}})),
        )
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match watch.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                seen.push((o.types.unwrap().api_version, o.data["spec"]["a"].clone()))
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let beta = "multi.example.com/v1beta1".to_string();
    assert_eq!(seen, [(beta.clone(), json!(1)), (beta, json!(2))]);
    let listed = api_at("v1beta1").list(&Default::default()).await.unwrap();
    assert_eq!(listed.items[0].data["spec"]["a"], 2);

    // An established CRD keeps its scope and kind; a printer column needs a known type.
    let mut changed = crds.get(name).await.unwrap();
    changed.spec.scope = "Cluster".into();
    changed.spec.names.kind = "Other".into();
    changed.spec.versions[1].additional_printer_columns = Some(vec![
        serde_json::from_value(json!({"name": "A", "type": "text", "jsonPath": ".spec.a"}))
            .unwrap(),
    ]);
    let err = crds
        .replace(name, &PostParams::default(), &changed)
        .await
        .unwrap_err();
    assert_eq!(
        causes(err),
        [
            "spec.versions[1].additionalPrinterColumns[0].type: Invalid value: \"text\": must be one of boolean,date,integer,number,string",
            "spec.scope: Invalid value: \"Cluster\": field is immutable",
            "spec.names.kind: Invalid value: \"Other\": field is immutable",
        ]
    );
}
