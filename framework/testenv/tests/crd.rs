//! CustomResourceDefinitions over HTTP with a real `kube::Client`: a CRD is established and its
//! resource discovered, custom resources (namespaced and cluster-scoped) get every verb, watches,
//! selectors (including `selectableFields`), finalizers, the status and scale subresources and
//! `metadata.generation`, and kube-runtime's watcher follows them; deleting the CRD deletes its
//! objects and its discovery entry.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind, ResourceExt};
use kube::runtime::wait::{await_condition, conditions};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

const GROUP: &str = "stable.example.com";

fn widget_crd(scope: &str, plural: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {"plural": plural, "kind": kind, "shortNames": [format!("{}x", &plural[..2])], "categories": ["gadgets"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
                "selectableFields": [{"jsonPath": ".spec.color"}],
                "additionalPrinterColumns": [{"name": "Color", "type": "string", "jsonPath": ".spec.color"}],
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "color": {"type": "string"},
                        "replicas": {"type": "integer"},
                        "size": {"type": "integer", "default": 1}
                    }},
                    "status": {"type": "object", "properties": {
                        "ready": {"type": "boolean"}, "replicas": {"type": "integer"}, "selector": {"type": "string"}
                    }}
                }}}
            }]
        }
    })
}

async fn install(client: &kube::Client, crd: Value) -> CustomResourceDefinition {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    let name = crd.metadata.name.clone().unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let established = await_condition(crds, &name, conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(10), established)
        .await
        .expect("the CRD is established")
        .unwrap()
        .unwrap()
}

fn resource(plural: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", kind), plural)
}

fn widget(name: &str, color: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
        "metadata": {"name": name, "labels": {"app": "demo"}},
        "spec": {"color": color, "replicas": 1, "unknown": "pruned"},
        "status": {"ready": true}
    }))
    .unwrap()
}

fn generation(o: &DynamicObject) -> i64 {
    o.metadata.generation.unwrap_or(0)
}

#[tokio::test]
async fn an_established_crd_serves_its_resource_with_every_verb() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crd = install(&client, widget_crd("Namespaced", "widgets", "Widget")).await;
    let status = crd.status.unwrap();
    let accepted = status.accepted_names.unwrap();
    assert_eq!(
        (accepted.plural.as_str(), accepted.kind.as_str()),
        ("widgets", "Widget")
    );
    assert_eq!(accepted.list_kind.as_deref(), Some("WidgetList"));
    assert_eq!(accepted.singular.as_deref(), Some("widget"));
    assert_eq!(status.stored_versions, Some(vec!["v1".to_string()]));
    let reasons: Vec<(String, String)> = status
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.reason.unwrap_or_default()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("NamesAccepted".into(), "NoConflicts".into()),
            ("Established".into(), "InitialNamesAccepted".into())
        ]
    );

    let list = client
        .list_api_group_resources(&format!("{GROUP}/v1"))
        .await
        .unwrap();
    let names: Vec<&str> = list.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["widgets", "widgets/status", "widgets/scale"]);
    assert_eq!(list.resources[0].short_names, Some(vec!["wix".to_string()]));
    assert_eq!(
        list.resources[0].categories,
        Some(vec!["gadgets".to_string()])
    );
    let groups = client.list_api_groups().await.unwrap();
    assert!(groups.groups.iter().any(|g| g.name == GROUP));

    let ar = resource("widgets", "Widget");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();

    let created = api
        .create(&PostParams::default(), &widget("w1", "blue"))
        .await
        .unwrap();
    assert_eq!(generation(&created), 1);
    assert!(
        created.data.get("status").is_none(),
        "create cannot set status"
    );
    assert_eq!(
        created.data["spec"],
        json!({"color": "blue", "replicas": 1, "size": 1})
    );
    api.create(&PostParams::default(), &widget("w2", "red"))
        .await
        .unwrap();

    // Spec changes bump the generation; status and metadata changes do not.
    let pp = PatchParams::default();
    let w = api
        .patch(
            "w1",
            &pp,
            &Patch::Merge(json!({"spec": {"color": "green"}, "status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(generation(&w), 2);
    assert!(
        w.data.get("status").is_none(),
        "the main endpoint ignores status"
    );
    let w = api
        .patch_status("w1", &pp, &Patch::Merge(json!({"spec": {"color": "ignored"}, "status": {"ready": true}, "metadata": {"labels": {"ignored": "yes"}}})))
        .await
        .unwrap();
    assert_eq!(generation(&w), 2);
    assert_eq!(w.data["status"], json!({"ready": true}));
    assert_eq!(w.data["spec"]["color"], "green");
    assert!(
        !w.labels().contains_key("ignored"),
        "a custom resource's /status takes only status"
    );
    let w = api
        .patch(
            "w1",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(generation(&w), 2);

    // PUT with a stale resourceVersion is a conflict; with the current one it works.
    let mut stale = created.clone();
    stale.data["spec"]["color"] = "red".into();
    let err = api
        .replace("w1", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err}"
    );
    let mut fresh = api.get("w1").await.unwrap();
    fresh.data["spec"]["color"] = "red".into();
    let replaced = api
        .replace("w1", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_eq!(generation(&replaced), 3);

    // The scale subresource reads and writes the declared paths.
    let scale = api.get_scale("w1").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    let scale = api
        .patch_scale("w1", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await
        .unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    let w = api.get("w1").await.unwrap();
    assert_eq!(
        (w.data["spec"]["replicas"].clone(), generation(&w)),
        (json!(3), 4)
    );
    let mut scale = api.get_scale("w1").await.unwrap();
    scale.spec.as_mut().unwrap().replicas = Some(5);
    let scale = api
        .replace_scale("w1", &PostParams::default(), &scale)
        .await
        .unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(5));
    assert_eq!(api.get("w1").await.unwrap().data["spec"]["replicas"], 5);

    // Field selectors: metadata.name, metadata.namespace and the CRD's selectableFields.
    let names = |l: kube::core::ObjectList<DynamicObject>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|o| o.metadata.name.unwrap())
            .collect()
    };
    let red = api
        .list(&ListParams::default().fields("spec.color=red"))
        .await
        .unwrap();
    assert_eq!(names(red), ["w1", "w2"]);
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=w2"))
        .await
        .unwrap();
    assert_eq!(names(by_name), ["w2"]);
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let by_ns = all
        .list(&ListParams::default().fields("metadata.namespace=default"))
        .await
        .unwrap();
    assert_eq!(by_ns.items.len(), 2);
    let err = api
        .list(&ListParams::default().fields("spec.size=1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 400),
        "{err}"
    );

    // Finalizers hold a deleted object (and its deletion bumps the generation) until removed.
    api.patch(
        "w2",
        &pp,
        &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
    )
    .await
    .unwrap();
    let held = api.delete("w2", &DeleteParams::default()).await.unwrap();
    let held = held.left().expect("held by its finalizer");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(generation(&held), 2);
    api.patch(
        "w2",
        &pp,
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(api.get_opt("w2").await.unwrap().is_none());
    api.delete("w1", &DeleteParams::default()).await.unwrap();

    let mut seen = Vec::new();
    while seen.len() < 12 {
        let ev = tokio::time::timeout(Duration::from_secs(5), watch.try_next())
            .await
            .expect("watch event")
            .unwrap()
            .unwrap();
        let (ty, o) = match ev {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(o.types.as_ref().unwrap().api_version, format!("{GROUP}/v1"));
        seen.push(format!("{ty} {}", o.metadata.name.unwrap()));
        if seen.last().is_some_and(|s| s == "DELETED w1") {
            break;
        }
    }
    assert_eq!(seen.first().map(String::as_str), Some("ADDED w1"));
    assert_eq!(seen.last().map(String::as_str), Some("DELETED w1"));
    assert!(seen.contains(&"DELETED w2".to_string()));
}

#[tokio::test]
async fn cluster_scoped_resources_and_crd_deletion() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, widget_crd("Cluster", "gizmos", "Gizmo")).await;
    let ar = resource("gizmos", "Gizmo");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut g = widget("g1", "blue");
    g.types.as_mut().unwrap().kind = "Gizmo".into();
    let created = api.create(&PostParams::default(), &g).await.unwrap();
    assert_eq!(created.metadata.namespace, None);
    let in_ns: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let err = in_ns.get("g1").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err}"
    );

    let mut watch = api
        .watch(
            &WatchParams::default(),
            &created.metadata.resource_version.clone().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = format!("gizmos.{GROUP}");
    let deleting = crds.delete(&name, &DeleteParams::default()).await.unwrap();
    let deleting = deleting.left().expect("the CRD is returned terminating");
    assert_eq!(
        deleting.metadata.finalizers,
        Some(vec![
            "customresourcecleanup.apiextensions.k8s.io".to_string()
        ])
    );
    match watch.try_next().await.unwrap() {
        Some(WatchEvent::Deleted(o)) => assert_eq!(o.metadata.name.as_deref(), Some("g1")),
        other => panic!("want DELETED g1, got {other:?}"),
    }
    assert!(crds.get_opt(&name).await.unwrap().is_none());
    let err = api.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err}"
    );
    let err = client
        .list_api_group_resources(&format!("{GROUP}/v1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err}"
    );
    let groups = client.list_api_groups().await.unwrap();
    assert!(!groups.groups.iter().any(|g| g.name == GROUP));

    // The same CRD again starts empty.
    install(&client, widget_crd("Cluster", "gizmos", "Gizmo")).await;
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn a_crd_deletion_waits_for_finalizers_of_its_objects() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, widget_crd("Namespaced", "widgets", "Widget")).await;
    let ar = resource("widgets", "Widget");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let mut w = widget("held", "blue");
    w.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &w).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = format!("widgets.{GROUP}");
    crds.delete(&name, &DeleteParams::default()).await.unwrap();
    let held = api.get("held").await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "deleted, held by its finalizer"
    );
    assert!(
        crds.get_opt(&name).await.unwrap().is_some(),
        "the CRD waits"
    );
    let err = api
        .create(&PostParams::default(), &widget("new", "red"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 405),
        "{err}"
    );
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(
        crds.get_opt(&name).await.unwrap().is_none(),
        "the last object took the CRD with it"
    );
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_custom_resources() {
    use k8s_openapi::api::core::v1::Namespace;
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, widget_crd("Namespaced", "widgets", "Widget")).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let ar = resource("widgets", "Widget");
    let team: Api<DynamicObject> = Api::namespaced_with(client.clone(), "team", &ar);
    let default: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    team.create(&PostParams::default(), &widget("w", "blue"))
        .await
        .unwrap();
    default
        .create(&PostParams::default(), &widget("w", "blue"))
        .await
        .unwrap();
    namespaces
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    assert!(team.get_opt("w").await.unwrap().is_none());
    assert!(default.get_opt("w").await.unwrap().is_some());
}

#[tokio::test]
async fn a_kube_runtime_watcher_follows_custom_resources() {
    use kube::runtime::watcher::{self, Event};
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, widget_crd("Namespaced", "widgets", "Widget")).await;
    let ar = resource("widgets", "Widget");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    api.create(&PostParams::default(), &widget("before", "blue"))
        .await
        .unwrap();
    env.clear_requests();
    let mut events = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    let mut initial = Vec::new();
    loop {
        match events.try_next().await.unwrap().unwrap() {
            Event::Init => {}
            Event::InitApply(o) => initial.push(o.metadata.name.unwrap()),
            Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(initial, ["before"]);
    api.create(&PostParams::default(), &widget("after", "red"))
        .await
        .unwrap();
    match events.try_next().await.unwrap().unwrap() {
        Event::Apply(o) => assert_eq!(o.metadata.name.as_deref(), Some("after")),
        other => panic!("unexpected {other:?}"),
    }
    let mut verbs: Vec<String> = env
        .requests()
        .into_iter()
        .filter(|r| r.resource == "widgets")
        .map(|r| r.verb)
        .collect();
    verbs.sort();
    assert_eq!(verbs, ["create", "list", "watch"], "one LIST and one WATCH");
}
