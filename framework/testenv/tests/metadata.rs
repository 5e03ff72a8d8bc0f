//! Metadata-only answers over HTTP (`Accept: ...;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`),
//! as kube-apiserver gives them: lists, gets, writes and watches (streaming lists included) with
//! each object's metadata only, in JSON and protobuf, for built-in kinds and custom resources;
//! a 406 for a list asked for as one object and the reverse; a Status never converted.

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbmeta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::PartialObjectMeta;
use kube_testenv::TestEnv;
use prost::Message;
use serde_json::{Value, json};

const LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const ONE: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const PB_LIST: &str =
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

async fn get(client: &kube::Client, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let req = http::Request::get(path)
        .header("accept", accept)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, ct, bytes.to_vec())
}

async fn get_json(client: &kube::Client, path: &str, accept: &str) -> (u16, Value) {
    let (code, _, body) = get(client, path, accept).await;
    (code, serde_json::from_slice(&body).unwrap())
}

async fn configmaps(env: &TestEnv) -> Api<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for (name, team) in [("a", "x"), ("b", "y")] {
        let cm =
            json!({"metadata": {"name": name, "labels": {"team": team}}, "data": {"big": "value"}});
        let cm: ConfigMap = serde_json::from_value(cm).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    api
}

#[tokio::test]
async fn a_list_carries_each_objects_metadata_only() {
    let env = TestEnv::start().await.unwrap();
    configmaps(&env).await;
    let path = "/api/v1/namespaces/default/configmaps?limit=1";
    let (code, list) = get_json(&env.client(), path, LIST).await;
    assert_eq!(code, 200, "{list:#}");
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert!(list["metadata"]["resourceVersion"].is_string(), "{list:#}");
    assert!(
        list["metadata"]["continue"].is_string(),
        "paging is kept: {list:#}"
    );
    let item = &list["items"][0];
    assert_eq!(item["kind"], "PartialObjectMetadata");
    assert_eq!(item["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(item["metadata"]["labels"]["team"], "x");
    let keys: Vec<&String> = item.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata"]);

    // v1beta1 too, and through kube's metadata API.
    let beta = LIST.replace("v=v1", "v=v1beta1");
    let (_, list) = get_json(&env.client(), path, &beta).await;
    assert_eq!(list["items"][0]["apiVersion"], "meta.k8s.io/v1beta1");
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let listed = api.list_metadata(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 2);
    let one: PartialObjectMeta<ConfigMap> = api.get_metadata("b").await.unwrap();
    assert_eq!(one.types.unwrap().kind, "PartialObjectMetadata");
    assert_eq!(one.metadata.labels.unwrap()["team"], "y");
}

#[tokio::test]
async fn writes_answer_with_metadata_and_a_status_is_never_converted() {
    let env = TestEnv::start().await.unwrap();
    let api = configmaps(&env).await;
    let patch = json!({"metadata": {"labels": {"team": "z"}}});
    let patched = api
        .patch_metadata("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["team"], "z");
    let path = "/api/v1/namespaces/default/configmaps/none";
    let (code, status) = get_json(&env.client(), path, ONE).await;
    assert_eq!(code, 404);
    assert_eq!(status["kind"], "Status");
}

#[tokio::test]
async fn a_list_asked_for_as_one_object_and_the_reverse_are_406() {
    let env = TestEnv::start().await.unwrap();
    configmaps(&env).await;
    let c = env.client();
    let (code, status) = get_json(&c, "/api/v1/namespaces/default/configmaps", ONE).await;
    assert_eq!(code, 406);
    assert_eq!(status["reason"], "NotAcceptable");
    assert_eq!(
        status["message"],
        "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)"
    );
    let (code, status) = get_json(&c, "/api/v1/namespaces/default/configmaps/a", LIST).await;
    assert_eq!(code, 406);
    assert_eq!(
        status["message"],
        "you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)"
    );
    // Another group, version or kind is not served: with no other clause, a 406.
    let other = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v2";
    let (code, _) = get_json(&c, "/api/v1/namespaces/default/configmaps", other).await;
    assert_eq!(code, 406);
}

/// The lines of a watch that ends after one second.
async fn watch_lines(client: &kube::Client, query: &str, accept: &str) -> Vec<Value> {
    let path = format!("/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1&{query}");
    let (code, _, body) = get(client, &path, accept).await;
    assert_eq!(code, 200);
    String::from_utf8(body)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn a_streaming_list_of_metadata_ends_with_the_annotated_bookmark() {
    let env = TestEnv::start().await.unwrap();
    configmaps(&env).await;
    let query = "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";
    let lines = watch_lines(&env.client(), query, ONE).await;
    let kinds: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["type"].as_str().unwrap(),
                l["object"]["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds[..3],
        [
            ("ADDED", "PartialObjectMetadata"),
            ("ADDED", "PartialObjectMetadata"),
            ("BOOKMARK", "PartialObjectMetadata"),
        ]
    );
    assert!(lines[0]["object"].get("data").is_none());
    assert_eq!(
        lines[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    // Asked for as a list, each event goes out whole: upstream cannot convert one object into
    // a list, and a watch can no longer refuse.
    let whole = watch_lines(&env.client(), "", LIST).await;
    assert_eq!(whole[0]["object"]["kind"], "ConfigMap");
    assert_eq!(whole[0]["object"]["data"]["big"], "value");
}

#[tokio::test]
async fn kubes_metadata_watch_sees_later_changes_as_metadata() {
    let env = TestEnv::start().await.unwrap();
    let api = configmaps(&env).await;
    let rv = api
        .list_metadata(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let events = api
        .watch_metadata(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap();
    let mut events = std::pin::pin!(events);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"k": "v"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    use futures::StreamExt;
    match events.next().await {
        Some(Ok(WatchEvent::Added(m))) => {
            assert_eq!(m.metadata.name.as_deref(), Some("c"));
            assert_eq!(m.types.unwrap().kind, "PartialObjectMetadata");
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// The `k8s\0` envelope's apiVersion, kind and raw bytes.
fn unwrap(body: &[u8]) -> (String, String, Vec<u8>) {
    let u = Unknown::decode(body.strip_prefix(b"k8s\0").expect("k8s\\0 magic")).unwrap();
    let tm = u.type_meta.unwrap();
    (tm.api_version.unwrap(), tm.kind.unwrap(), u.raw.unwrap())
}

#[tokio::test]
async fn protobuf_metadata_for_built_in_kinds_and_custom_resources() {
    let env = TestEnv::start().await.unwrap();
    configmaps(&env).await;
    let c = env.client();
    let (code, ct, body) = get(&c, "/api/v1/namespaces/default/configmaps", PB_LIST).await;
    assert_eq!(
        (code, ct.as_str()),
        (200, "application/vnd.kubernetes.protobuf")
    );
    let (api_version, kind, raw) = unwrap(&body);
    assert_eq!(
        (api_version.as_str(), kind.as_str()),
        ("meta.k8s.io/v1", "PartialObjectMetadataList")
    );
    let list = pbmeta::PartialObjectMetadataList::decode(raw.as_slice()).unwrap();
    let names: Vec<String> = list
        .items
        .iter()
        .filter_map(|i| i.metadata.as_ref()?.name.clone())
        .collect();
    assert_eq!(names, ["a", "b"]);

    // A custom resource has no protobuf form, but its metadata has.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(c.clone());
    let crd = serde_json::from_value(json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"}, "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let (code, _, _) = get(&c, path, "application/vnd.kubernetes.protobuf").await;
    assert_eq!(code, 406, "no protobuf of the objects themselves");
    let (code, ct, body) = get(&c, path, PB_LIST).await;
    assert_eq!(
        (code, ct.as_str()),
        (200, "application/vnd.kubernetes.protobuf")
    );
    assert_eq!(unwrap(&body).1, "PartialObjectMetadataList");
}
