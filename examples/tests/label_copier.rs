//! The `label-copier` example against kube-testenv, started as a process: it copies a label from
//! ConfigMaps onto the Services that own them, and from Widgets, whose CRD is created after it
//! started, onto the ConfigMaps that own them; bad input (an unknown kind, a kind not served to an
//! informer, a selector the API server cannot parse) stops it with the reason. And
//! in-process with per-kind cache options, which narrow what it lists and watches.

use controller_manager::informer::{CacheOptions, KindOptions};
use controller_manager::manager::{Manager, ManagerConfig};
use controller_manager::testing::{ManagerProcess, ManagerTask, Requests, TestEnv};
use embedding_examples::label_copier;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams, ResourceExt};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

const LABEL: &str = "example.com/team";

fn labelled<K: ResourceExt>(value: &'static str) -> impl Fn(Option<&K>) -> bool {
    move |o| o.and_then(|o| o.labels().get(LABEL).cloned()).as_deref() == Some(value)
}

async fn create<K>(api: &Api<K>, obj: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

fn owned_by(api_version: &str, kind: &str, owner: &impl ResourceExt) -> serde_json::Value {
    json!([{"apiVersion": api_version, "kind": kind, "name": owner.name_any(), "uid": owner.uid(), "controller": true}])
}

/// Service `web` in `namespace` and ConfigMap `web-config` it owns, labelled `payments`.
async fn web_and_its_config(env: &TestEnv, namespace: &str) -> (Api<Service>, Api<ConfigMap>) {
    let services: Api<Service> = Api::namespaced(env.client(), namespace);
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), namespace);
    let spec = json!({"ports": [{"port": 80}]});
    let web = create(
        &services,
        json!({"metadata": {"name": "web"}, "spec": spec}),
    )
    .await;
    let owners = owned_by("v1", "Service", &web);
    let labels = json!({LABEL: "payments"});
    let config =
        json!({"metadata": {"name": "web-config", "labels": labels, "ownerReferences": owners}});
    create(&configmaps, config).await;
    (services, configmaps)
}

#[tokio::test]
async fn copies_the_label_onto_owners_of_every_named_kind() {
    let env = TestEnv::start().await.unwrap();
    let (services, configmaps) = web_and_its_config(&env, "default").await;

    let exe = env!("CARGO_BIN_EXE_label-copier");
    let kinds = "--kinds=v1/ConfigMap,example.com/v1/Widget";
    let mut copier = ManagerProcess::start(
        exe,
        &env,
        ["--secure-port=0", "--leader-elect=false", kinds],
    )
    .unwrap();
    copier
        .wait_for(
            &services,
            "web",
            "the ConfigMap's label on its Service",
            labelled("payments"),
        )
        .await
        .unwrap();

    // Widgets are not served yet; their CRD comes now, and a Widget owned by a ConfigMap.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    create(&crds, json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": open}}}}],
        },
    }))
    .await;
    let holder = create(&configmaps, json!({"metadata": {"name": "holder"}})).await;
    let widget = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    let widgets: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &widget);
    let owners = owned_by("v1", "ConfigMap", &holder);
    create(
        &widgets,
        json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "labels": {LABEL: "search"}, "ownerReferences": owners},
        }),
    )
    .await;
    copier
        .wait_for(
            &configmaps,
            "holder",
            "the Widget's label on its ConfigMap",
            labelled("search"),
        )
        .await
        .unwrap();
    copier.stop().await.unwrap();

    // Metadata only (the waits above are the test's own, by name).
    for resource in ["configmaps", "widgets"] {
        let watches = Requests::of(&env)
            .verb("watch")
            .resource(resource)
            .without_waits();
        assert!(watches.count() >= 1, "{resource}");
        let metadata = watches.clone().metadata_only().count();
        assert_eq!(metadata, watches.count(), "{resource}");
    }
}

#[tokio::test]
async fn bad_input_stops_it_with_the_reason() {
    let env = TestEnv::start().await.unwrap();
    let exe = env!("CARGO_BIN_EXE_label-copier");
    for (args, reason) in [
        // Not written apiVersion/Kind: refused before the process connects.
        (
            vec!["--kinds=Nope"],
            "--kinds: unknown kind \"Nope\": write it as apiVersion/Kind",
        ),
        // Unknown kinds in groups only the API server itself serves.
        (
            vec!["--kinds=v1/ConfigMap,v1/Nope"],
            "unknown kind v1/Nope: v1 serves",
        ),
        (
            vec!["--kinds=apps/v9/Deployment"],
            "unknown kind apps/v9/Deployment: the API server serves no apps/v9",
        ),
        // Served, but not to an informer.
        (
            vec!["--kinds=authentication.k8s.io/v1/TokenReview"],
            "authentication.k8s.io/v1/TokenReview is not served for list and watch (it serves create)",
        ),
        // A selector the API server cannot parse: its 400 and words.
        (
            vec!["--kinds=v1/ConfigMap", "--selector=team in (x"],
            "the API server refused its list (400 BadRequest): unable to parse requirement",
        ),
    ] {
        let args = [&["--secure-port=0", "--leader-elect=false"][..], &args].concat();
        let mut copier = ManagerProcess::start(exe, &env, &args).unwrap();
        let error = copier
            .until("the copier's exit", std::future::pending::<()>())
            .await
            .unwrap_err();
        assert!(
            error.exit().is_some_and(|e| !e.is_clean()),
            "{args:?}: {error}"
        );
        let output = copier.output();
        assert!(output.contains(reason), "{args:?}: {output}");
    }
}

#[tokio::test]
async fn cache_options_narrow_what_the_copier_lists_and_watches()
-> Result<(), Box<dyn std::error::Error>> {
    let env = TestEnv::start().await?;
    let kinds = ["v1/ConfigMap".to_string()];
    let mut config = ManagerConfig::new(label_copier::NAME);
    config.graceful_shutdown_timeout = std::time::Duration::from_secs(5);
    config.cache = CacheOptions::new()
        .kind::<ConfigMap>(
            KindOptions::new()
                .namespaces(["team-a", "team-b"]) // one watch per namespace, one store
                .labels(LABEL) // added to every ConfigMap informer's own selector
                .metadata_transform(|meta| meta.annotations = None), // replaces the default
        )
        .kind::<Service>(KindOptions::new().uncached()) // reader::<Service>() asks the API server
        .kind_named("example.com/v1/Widget", KindOptions::new().labels(LABEL))?;
    let namespaces: Api<Namespace> = Api::all(env.client());
    for ns in ["team-a", "team-b"] {
        create(&namespaces, json!({"metadata": {"name": ns}})).await;
    }
    let (services, _) = web_and_its_config(&env, "team-a").await;
    env.clear_requests();

    let initializers = label_copier::initializers(&kinds, LABEL)?;
    let manager = Manager::new(config, env.client(), ()).with_initializers(initializers);
    let mut copier = ManagerTask::start(manager);
    copier
        .wait_for(
            &services,
            "web",
            "the label copied in team-a",
            labelled("payments"),
        )
        .await?;
    copier.stop().await?;
    let watches = Requests::of(&env)
        .verb("watch")
        .resource("configmaps")
        .param("labelSelector", LABEL);
    let mut watched: Vec<Option<String>> = watches
        .records()
        .iter()
        .map(|r| r.namespace.clone())
        .collect();
    watched.sort();
    assert_eq!(
        watched,
        [Some("team-a".to_string()), Some("team-b".to_string())]
    );
    Ok(())
}
