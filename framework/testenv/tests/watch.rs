//! Watches through kube::Client and kube-runtime's watcher: events, resume, 410, bookmarks,
//! streaming lists, timeouts and the request log of one LIST + one WATCH.

mod support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, DeleteParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};
use kube_testenv::TestEnv;
use serde_json::json;
use support::cluster_with;

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

fn cm(name: &str, v: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"a": v}})).unwrap()
}

#[tokio::test]
async fn watch_streams_added_modified_deleted_from_a_resource_version() {
    let env = TestEnv::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let rv = env.resource_version().to_string();
    let mut stream = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &cm("w", "1"))
        .await
        .unwrap();
    let mut changed = cm("w", "2");
    changed.metadata.resource_version = None;
    cms.replace("w", &PostParams::default(), &{
        let mut c = cms.get("w").await.unwrap();
        c.data = changed.data;
        c
    })
    .await
    .unwrap();
    cms.delete("w", &DeleteParams::default()).await.unwrap();
    let mut kinds = Vec::new();
    for _ in 0..3 {
        match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(c) => kinds.push(("ADDED", c.data.unwrap()["a"].clone())),
            WatchEvent::Modified(c) => kinds.push(("MODIFIED", c.data.unwrap()["a"].clone())),
            WatchEvent::Deleted(c) => kinds.push(("DELETED", c.data.unwrap()["a"].clone())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        kinds,
        [
            ("ADDED", "1".to_string()),
            ("MODIFIED", "2".into()),
            ("DELETED", "2".into())
        ]
    );
}

#[tokio::test]
async fn watch_from_expired_resource_version_gets_410_error_event() {
    let (env, nodes) = cluster_with(node("a")).await;
    env.faults().expire_history();
    let mut stream = nodes
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(
                e.message.starts_with("too old resource version: 1 ("),
                "{}",
                e.message
            );
        }
        other => panic!("expected ERROR, got {other:?}"),
    }
    assert!(
        stream.try_next().await.unwrap().is_none(),
        "stream ends after the ERROR"
    );
}

#[tokio::test]
async fn history_window_bounds_resume() {
    let env = TestEnv::builder().history_window(3).start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    let start = env.resource_version();
    for i in 0..5 {
        nodes
            .create(&PostParams::default(), &node(&format!("n{i}")))
            .await
            .unwrap();
    }
    let mut old = nodes
        .watch(&WatchParams::default(), &start.to_string())
        .await
        .unwrap()
        .boxed();
    assert!(matches!(old.try_next().await.unwrap(), Some(WatchEvent::Error(e)) if e.code == 410));
    let recent = (env.resource_version() - 2).to_string();
    let mut ok = nodes
        .watch(&WatchParams::default(), &recent)
        .await
        .unwrap()
        .boxed();
    let mut names = Vec::new();
    for _ in 0..2 {
        match ok.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(n) => names.push(n.metadata.name.unwrap()),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(names, ["n3", "n4"]);
}

#[tokio::test(start_paused = true)]
async fn bookmarks_arrive_on_the_interval_and_timeout_ends_the_stream() {
    let env = TestEnv::builder()
        .bookmark_interval(Duration::from_secs(5))
        .start()
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    let rv = env.resource_version().to_string();
    let wp = WatchParams::default().timeout(12);
    let mut stream = nodes.watch(&wp, &rv).await.unwrap().boxed();
    nodes
        .create(&PostParams::default(), &node("b"))
        .await
        .unwrap();
    assert!(matches!(
        stream.try_next().await.unwrap(),
        Some(WatchEvent::Added(_))
    ));
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Bookmark(b)) => assert_eq!(
            b.metadata.resource_version,
            env.resource_version().to_string()
        ),
        other => panic!("expected BOOKMARK, got {other:?}"),
    }
    assert!(matches!(
        stream.try_next().await.unwrap(),
        Some(WatchEvent::Bookmark(_))
    ));
    assert!(
        stream.try_next().await.unwrap().is_none(),
        "timeoutSeconds ends the stream"
    );
}

#[tokio::test]
async fn kube_runtime_watcher_does_one_list_and_one_watch() {
    let (env, nodes) = cluster_with(node("pre")).await;
    env.clear_requests();
    let mut events = watcher::watcher(nodes.clone(), watcher::Config::default()).boxed();
    let mut seen_init = Vec::new();
    loop {
        match events.try_next().await.unwrap().unwrap() {
            Event::Init => {}
            Event::InitApply(n) => seen_init.push(n.metadata.name.unwrap()),
            Event::InitDone => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen_init, ["pre"]);
    nodes
        .create(&PostParams::default(), &node("live"))
        .await
        .unwrap();
    match events.try_next().await.unwrap().unwrap() {
        Event::Apply(n) => assert_eq!(n.metadata.name.as_deref(), Some("live")),
        other => panic!("{other:?}"),
    }
    let verbs: Vec<(String, String)> = env
        .requests()
        .into_iter()
        .filter(|r| r.resource == "nodes")
        .map(|r| (r.verb, r.user_agent.is_some().to_string()))
        .collect();
    assert_eq!(
        verbs.iter().filter(|(v, _)| v == "list").count(),
        1,
        "{verbs:?}"
    );
    assert_eq!(
        verbs.iter().filter(|(v, _)| v == "watch").count(),
        1,
        "{verbs:?}"
    );
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_annotated_bookmark() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    for n in ["a", "b"] {
        nodes
            .create(&PostParams::default(), &node(n))
            .await
            .unwrap();
    }
    env.clear_requests();
    let cfg = watcher::Config::default().streaming_lists();
    let mut events = watcher::watcher(nodes.clone(), cfg).boxed();
    let mut seen = Vec::new();
    loop {
        match events.try_next().await.unwrap().unwrap() {
            Event::Init => {}
            Event::InitApply(n) => seen.push(n.metadata.name.unwrap()),
            Event::InitDone => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, ["a", "b"]);
    let reqs = env.requests();
    assert_eq!(
        reqs.iter()
            .filter(|r| r.resource == "nodes" && r.verb == "list")
            .count(),
        0
    );
    let watch = reqs.iter().find(|r| r.verb == "watch").unwrap();
    assert!(
        watch.query.contains("sendInitialEvents=true"),
        "{}",
        watch.query
    );
}

#[tokio::test]
async fn watcher_recovers_from_closed_watches_and_410() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    let mut events = watcher::watcher(nodes.clone(), watcher::Config::default()).boxed();
    while !matches!(events.try_next().await.unwrap().unwrap(), Event::InitDone) {}
    env.faults().close_watches();
    nodes
        .create(&PostParams::default(), &node("after-close"))
        .await
        .unwrap();
    loop {
        if let Event::Apply(n) = events.try_next().await.unwrap().unwrap() {
            assert_eq!(n.metadata.name.as_deref(), Some("after-close"));
            break;
        }
    }
    // The watcher is not polled while the server cuts its watch and compacts past its
    // resourceVersion, so its re-watch must get 410 and re-list.
    env.faults().close_watches();
    nodes
        .create(&PostParams::default(), &node("after-410"))
        .await
        .unwrap();
    env.faults().expire_history();
    env.clear_requests();
    let mut relisted = Vec::new();
    loop {
        match events.try_next().await {
            Ok(Some(Event::InitApply(n))) => relisted.push(n.metadata.name.unwrap()),
            Ok(Some(Event::InitDone)) => break,
            Ok(Some(_)) => {}
            Ok(None) => panic!("watcher ended"),
            Err(_) => {} // the 410 surfaces as an error before the re-list
        }
    }
    relisted.sort();
    assert_eq!(relisted, ["after-410", "after-close"]);
    let verbs: Vec<String> = env.requests().into_iter().map(|r| r.verb).collect();
    assert_eq!(verbs, ["watch", "list"], "re-watch got 410, then a re-list");
}

#[tokio::test]
async fn restart_drops_watches_and_keeps_data() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    let mut events = watcher::watcher(nodes.clone(), watcher::Config::default()).boxed();
    while !matches!(events.try_next().await.unwrap().unwrap(), Event::InitDone) {}
    nodes
        .create(&PostParams::default(), &node("kept"))
        .await
        .unwrap();
    assert!(matches!(
        events.try_next().await.unwrap().unwrap(),
        Event::Apply(_)
    ));
    assert_eq!(env.open_watches(), 1);
    env.restart().await;
    assert_eq!(env.open_watches(), 0);
    assert!(nodes.get("kept").await.is_ok());
    nodes
        .create(&PostParams::default(), &node("new"))
        .await
        .unwrap();
    loop {
        if let Ok(Some(Event::Apply(n))) = events.try_next().await {
            assert_eq!(n.metadata.name.as_deref(), Some("new"));
            break;
        }
    }
}

#[tokio::test]
async fn removing_the_last_finalizer_is_one_deleted_event() {
    use kube::api::{Patch, PatchParams};
    let env = TestEnv::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let mut c = cm("f", "1");
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &c).await.unwrap();
    let held = cms
        .delete("f", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    let rv = held.metadata.resource_version.clone().unwrap();
    let mut stream = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let released = cms
        .patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert_eq!(
        released.metadata.resource_version.as_deref(),
        Some(rv.as_str()),
        "the aborted update keeps its resourceVersion"
    );
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Deleted(d) => assert_eq!(d.metadata.finalizers.unwrap(), ["example.com/hold"]),
        other => panic!("expected only DELETED, got {other:?}"),
    }
    assert!(cms.get_opt("f").await.unwrap().is_none());
}
