//! Per-kind cache options end to end over HTTP against kube-testenv: a label and a field
//! selector, a set of namespaces (one watch each, one store), transforms of whole objects and of
//! metadata (a metadata-only cache's too), uncached reads, and the errors for bad
//! input (a selector the API server cannot parse, a namespace outside the set).

use std::time::Duration;

use controller_manager::informer::{
    CacheOptions, InformerScope, KindOptions, ObjectKey, SharedInformerFactory, SyncError,
};
use controller_manager::testing::{Requests, TestEnv};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, PostParams};
use kube::core::PartialObjectMeta;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const SYNC: Duration = Duration::from_secs(30);

async fn create<K>(env: &TestEnv, namespace: &str, obj: serde_json::Value)
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(env.client(), namespace);
    let obj: K = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

async fn namespace(env: &TestEnv, name: &str) {
    let api: Api<Namespace> = Api::all(env.client());
    let ns = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &ns).await.unwrap();
}

fn names<K: kube::Resource>(objects: &[std::sync::Arc<K>]) -> Vec<String> {
    let mut names: Vec<String> = objects
        .iter()
        .map(|o| ObjectKey::from_object(o.as_ref()).to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn selectors_namespaces_and_transforms_shape_what_the_process_caches() {
    let env = TestEnv::start().await.unwrap();
    for ns in ["a", "b", "c"] {
        namespace(&env, ns).await;
        for (name, team) in [("one", "x"), ("two", "y")] {
            let cm =
                json!({"metadata": {"name": name, "labels": {"team": team}}, "data": {"k": "v"}});
            create::<ConfigMap>(&env, ns, cm).await;
        }
    }
    env.clear_requests();
    let options = CacheOptions::new().kind::<ConfigMap>(
        KindOptions::new()
            .labels("team=x")
            .namespaces(["a", "b"])
            .transform(|cm: &mut ConfigMap| cm.data = None),
    );
    let factory = SharedInformerFactory::new(env.client()).with_cache_options(options);
    let informer = factory.informer::<ConfigMap>();
    let stop = CancellationToken::new();
    factory.start(stop.clone());
    factory.wait_for_sync(SYNC).await.unwrap();

    let cached = informer.store().list();
    assert_eq!(names(&cached), ["a/one", "b/one"]);
    assert!(cached.iter().all(|cm| cm.data.is_none()), "transformed");
    assert!(
        cached.iter().all(|cm| cm.metadata.managed_fields.is_some()),
        "a transform replaces the default"
    );
    let watches = Requests::of(&env).verb("watch").resource("configmaps");
    let mut namespaces: Vec<Option<String>> = watches
        .records()
        .iter()
        .map(|r| r.namespace.clone())
        .collect();
    namespaces.sort();
    assert_eq!(namespaces, [Some("a".to_string()), Some("b".to_string())]);
    assert_eq!(watches.param("labelSelector", "team=x").count(), 2);
    stop.cancel();
}

#[tokio::test]
async fn a_field_selector_and_a_metadata_transform_shape_a_metadata_only_cache() {
    let env = TestEnv::start().await.unwrap();
    for name in ["keep", "skip"] {
        let secret = json!({"metadata": {"name": name, "labels": {"team": "x"}, "annotations": {"note": "n"}}, "stringData": {"k": "v"}});
        create::<Secret>(&env, "default", secret).await;
    }
    env.clear_requests();
    let options = CacheOptions::new().kind::<Secret>(
        KindOptions::new()
            .fields("metadata.name=keep")
            .metadata_transform(|meta| meta.annotations = None),
    );
    let factory = SharedInformerFactory::new(env.client()).with_cache_options(options);
    let informer = factory.informer::<PartialObjectMeta<Secret>>();
    let stop = CancellationToken::new();
    factory.start(stop.clone());
    factory.wait_for_sync(SYNC).await.unwrap();

    let cached = informer.store().list();
    assert_eq!(names(&cached), ["default/keep"]);
    let meta = &cached[0].metadata;
    assert_eq!(meta.annotations, None, "transformed");
    assert!(meta.labels.as_ref().is_some_and(|l| l["team"] == "x"));
    assert!(
        meta.managed_fields.is_some(),
        "a transform replaces the default"
    );
    let watches = Requests::of(&env).verb("watch").resource("secrets");
    assert_eq!(watches.count(), 1);
    assert_eq!(
        watches
            .clone()
            .metadata_only()
            .param("fieldSelector", "metadata.name=keep")
            .count(),
        1
    );
    stop.cancel();
}

#[tokio::test]
async fn uncached_reads_go_to_the_api_server_and_open_no_watch() {
    let env = TestEnv::start().await.unwrap();
    let secret = json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}});
    create::<Secret>(&env, "default", secret).await;
    env.clear_requests();
    let options = CacheOptions::new().kind::<Secret>(KindOptions::new().uncached());
    let factory = SharedInformerFactory::new(env.client()).with_cache_options(options);
    let reader = factory.reader::<Secret>();
    assert!(!reader.is_cached());
    factory.start(CancellationToken::new());
    let read = reader
        .get(&ObjectKey::namespaced("default", "s"))
        .await
        .unwrap()
        .expect("the Secret");
    assert!(read.data.as_ref().is_some_and(|d| d.contains_key("k")));
    assert!(
        reader
            .get(&ObjectKey::namespaced("default", "none"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(names(&reader.list().await.unwrap()), ["default/s"]);
    let secrets = Requests::of(&env)
        .resource("secrets")
        .per_verb_and_resource();
    let verbs: Vec<&str> = secrets.keys().map(|(verb, _)| verb.as_str()).collect();
    assert_eq!(verbs, ["get", "list"], "{secrets:?}");
    assert_eq!(secrets[&("get".to_string(), "secrets".to_string())], 2);
    assert!(factory.informers_status().is_empty());
}

#[tokio::test]
async fn a_selector_the_api_server_cannot_parse_fails_the_sync_with_its_message() {
    let env = TestEnv::start().await.unwrap();
    let options = CacheOptions::new()
        .kind::<ConfigMap>(KindOptions::new().labels("team in (x"))
        .kind::<Secret>(KindOptions::new().fields("spec.bogus=x"));
    let factory = SharedInformerFactory::new(env.client()).with_cache_options(options);
    let _configmaps = factory.informer::<ConfigMap>();
    let _secrets = factory.informer::<PartialObjectMeta<Secret>>();
    let stop = CancellationToken::new();
    factory.start(stop.clone());
    let err = factory.wait_for_sync(SYNC).await.expect_err("refused");
    assert!(matches!(err, SyncError::Failed { .. }), "{err:?}");
    let message = err.to_string();
    // Each kind named with its selector and the server's reason.
    for expected in [
        "ConfigMap (labels=team in (x): the API server refused its list (400 BadRequest): unable to parse requirement",
        "Secret (fields=spec.bogus=x): the API server refused its list (400 BadRequest): field label not supported: spec.bogus",
    ] {
        assert!(message.contains(expected), "{message}");
    }
    // Refused for its selector, not as a streaming list: one watch each, no fallback to a LIST
    // (which the server would refuse the same), no retries.
    for resource in ["configmaps", "secrets"] {
        let requests = Requests::of(&env).resource(resource);
        assert_eq!(requests.clone().verb("list").count(), 0, "{resource}");
        assert_eq!(requests.verb("watch").count(), 1, "{resource}");
    }
    stop.cancel();
}

#[tokio::test]
async fn a_scope_outside_the_cached_namespaces_fails_the_sync() {
    let env = TestEnv::start().await.unwrap();
    let options = CacheOptions::new().kind::<ConfigMap>(KindOptions::new().namespaces(["a"]));
    let factory = SharedInformerFactory::new(env.client()).with_cache_options(options);
    let _b = factory.informer_for::<ConfigMap>(InformerScope::all().in_namespace("b"));
    factory.start(CancellationToken::new());
    let err = factory.wait_for_sync(SYNC).await.expect_err("outside");
    assert!(
        err.to_string().contains(
            "namespace b is not among the namespaces the process caches ConfigMap in (a)"
        ),
        "{err}"
    );
    assert_eq!(Requests::of(&env).resource("configmaps").count(), 0);
}
