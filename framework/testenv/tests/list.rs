//! Lists: label (set-based too) and field selectors, limit + continue with upstream's token,
//! resourceVersion semantics (unset, "0", Exact from history, too large), namespaces.

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, ListParams, PostParams, VersionMatch};
use kube_testenv::TestEnv;
use serde_json::json;

async fn nodes_env(n: usize) -> (TestEnv, Api<Node>) {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    for i in 0..n {
        let role = if i % 2 == 0 { "worker" } else { "infra" };
        let node: Node = serde_json::from_value(json!({"metadata": {"name": format!("n{i}"), "labels": {"role": role}}, "spec": {"unschedulable": i == 3}})).unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    (env, nodes)
}

fn names(list: &kube::core::ObjectList<Node>) -> Vec<String> {
    list.items
        .iter()
        .map(|n| n.metadata.name.clone().unwrap())
        .collect()
}

#[tokio::test]
async fn label_and_field_selectors() {
    let (_env, nodes) = nodes_env(5).await;
    let l = |s: &str| ListParams::default().labels(s);
    assert_eq!(
        names(&nodes.list(&l("role=worker")).await.unwrap()),
        ["n0", "n2", "n4"]
    );
    assert_eq!(
        names(&nodes.list(&l("role in (infra)")).await.unwrap()),
        ["n1", "n3"]
    );
    assert_eq!(
        names(&nodes.list(&l("role notin (worker,infra)")).await.unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(
        names(&nodes.list(&l("!role")).await.unwrap()),
        Vec::<String>::new()
    );
    let f = |s: &str| ListParams::default().fields(s);
    assert_eq!(
        names(&nodes.list(&f("metadata.name=n2")).await.unwrap()),
        ["n2"]
    );
    assert_eq!(
        names(&nodes.list(&f("spec.unschedulable=true")).await.unwrap()),
        ["n3"]
    );
    assert_eq!(
        names(
            &nodes
                .list(&f("spec.unschedulable!=true,metadata.name!=n0"))
                .await
                .unwrap()
        ),
        ["n1", "n2", "n4"]
    );
    let err = nodes.list(&f("spec.bogus=x")).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(s) if s.code == 400 && s.message == "field label not supported: spec.bogus")
    );
}

#[tokio::test]
async fn limit_and_continue_page_through_a_consistent_snapshot() {
    let (env, nodes) = nodes_env(5).await;
    let first = nodes.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(names(&first), ["n0", "n1"]);
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    let rv = first.metadata.resource_version.clone().unwrap();
    // A write between pages is not seen by later pages (they come from the first page's RV).
    let late: Node = serde_json::from_value(json!({"metadata": {"name": "n3a"}})).unwrap();
    nodes.create(&PostParams::default(), &late).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    let second = nodes
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(&second), ["n2", "n3"]);
    assert_eq!(
        second.metadata.resource_version.as_deref(),
        Some(rv.as_str())
    );
    let third = nodes
        .list(
            &ListParams::default()
                .limit(2)
                .continue_token(second.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(names(&third), ["n4"]);
    assert_eq!(third.metadata.continue_, None);
    // kube's pager-less list sees the late node.
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        6
    );
    let _ = env;
}

#[tokio::test]
async fn resource_version_semantics() {
    let (env, nodes) = nodes_env(2).await;
    let rv_after_two = env.resource_version();
    let extra: Node = serde_json::from_value(json!({"metadata": {"name": "later"}})).unwrap();
    nodes.create(&PostParams::default(), &extra).await.unwrap();

    let any = nodes
        .list(&ListParams::default().match_any())
        .await
        .unwrap();
    assert_eq!(any.items.len(), 3);
    let at = |rv: &str, m: VersionMatch| ListParams::default().at(rv).matching(m);
    let rv = rv_after_two.to_string();
    let exact = nodes.list(&at(&rv, VersionMatch::Exact)).await.unwrap();
    assert_eq!(names(&exact), ["n0", "n1"]);
    assert_eq!(
        exact.metadata.resource_version,
        Some(rv_after_two.to_string())
    );
    let not_older = nodes.list(&at(&rv, VersionMatch::NotOlderThan)).await;
    let not_older = not_older.unwrap();
    assert_eq!(not_older.items.len(), 3);
    let mut cfg = env.config();
    cfg.default_retry = false;
    let no_retry: Api<Node> = Api::all(kube::Client::try_from(cfg).unwrap());
    let err = no_retry
        .list(&at("999999", VersionMatch::NotOlderThan))
        .await;
    let err = err.unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 504 && s.reason == "Timeout"));
    env.faults().expire_history();
    let err = nodes
        .list(
            &ListParams::default()
                .at(&rv_after_two.to_string())
                .matching(VersionMatch::Exact),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 410 && s.reason == "Expired"));
}

#[tokio::test]
async fn namespaced_lists_and_namespace_deletion() {
    let env = TestEnv::start().await.unwrap();
    let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(env.client());
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
    let created = ns_api.create(&PostParams::default(), &ns).await.unwrap();
    assert_eq!(
        created.metadata.labels.unwrap()["kubernetes.io/metadata.name"],
        "team"
    );
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Active"));
    for ns in ["team", "default"] {
        let cms: Api<ConfigMap> = Api::namespaced(env.client(), ns);
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let all: Api<ConfigMap> = Api::all(env.client());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    let team: Api<ConfigMap> = Api::namespaced(env.client(), "team");
    assert_eq!(
        team.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    let forbidden = ns_api
        .delete("default", &Default::default())
        .await
        .unwrap_err();
    assert!(matches!(forbidden, kube::Error::Api(s) if s.code == 403));
    ns_api.delete("team", &Default::default()).await.unwrap();
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        1,
        "namespace content deleted"
    );
}

#[tokio::test]
async fn delete_collection_by_label_and_watch_of_one_object() {
    use futures::TryStreamExt;
    use kube::api::{DeleteParams, WatchEvent, WatchParams};
    let (env, nodes) = nodes_env(4).await;
    let rv = env.resource_version().to_string();
    let mut one = nodes
        .watch(&WatchParams::default().fields("metadata.name=n1"), &rv)
        .await
        .unwrap()
        .boxed();
    let deleted = nodes
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("role=infra"),
        )
        .await
        .unwrap();
    let gone: Vec<String> = deleted
        .left()
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(gone, ["n1", "n3"]);
    assert_eq!(
        names(&nodes.list(&ListParams::default()).await.unwrap()),
        ["n0", "n2"]
    );
    match one.try_next().await.unwrap().unwrap() {
        WatchEvent::Deleted(n) => assert_eq!(n.metadata.name.as_deref(), Some("n1")),
        other => panic!("{other:?}"),
    }
    let verbs: Vec<String> = env.requests().into_iter().map(|r| r.verb).collect();
    assert!(verbs.contains(&"deletecollection".to_string()), "{verbs:?}");
}
