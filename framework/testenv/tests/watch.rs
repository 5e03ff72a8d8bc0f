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

/// The causes of the 422 (or the status of another refusal) a GET of `path` gets.
async fn refusal(env: &TestEnv, path: &str) -> (u16, String, Vec<(String, String)>) {
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    let status = match env.client().request_text(req).await {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("{path}: expected a refusal, got {other:?}"),
    };
    let causes = status.details.map(|d| d.causes).unwrap_or_default();
    let causes = causes.into_iter().map(|c| (c.field, c.message)).collect();
    (status.code, status.message, causes)
}

fn causes(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(f, m)| (f.to_string(), m.to_string()))
        .collect()
}

fn labelled(name: &str, role: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"role": role}}})).unwrap()
}

#[tokio::test]
async fn streaming_list_selects_and_ends_at_the_current_resource_version() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    for (n, role) in [("a", "web"), ("b", "db"), ("c", "web")] {
        nodes
            .create(&PostParams::default(), &labelled(n, role))
            .await
            .unwrap();
    }
    let rv = env.resource_version().to_string();
    let wp = WatchParams::streaming_lists().labels("role=web");
    let mut stream = nodes.watch(&wp, "").await.unwrap().boxed();
    let mut added = Vec::new();
    let end = loop {
        match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(n) => added.push(n.metadata.name.unwrap()),
            WatchEvent::Bookmark(b) => break b,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(added, ["a", "c"]);
    assert_eq!(end.metadata.resource_version, rv);
    assert_eq!(
        end.metadata.annotations.get("k8s.io/initial-events-end"),
        Some(&"true".to_string())
    );
    // Without bookmarks the initial events come, but no end bookmark (upstream's
    // isListWatchRequest needs both): the next event is the live one.
    let path = "/api/v1/nodes?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    let mut events = env
        .client()
        .request_events::<Node>(req)
        .await
        .unwrap()
        .boxed();
    for _ in 0..3 {
        let e = events.try_next().await.unwrap().unwrap();
        assert!(matches!(e, WatchEvent::Added(_)), "{e:?}");
    }
    nodes
        .create(&PostParams::default(), &labelled("d", "web"))
        .await
        .unwrap();
    match events.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(n) => assert_eq!(n.metadata.name.as_deref(), Some("d")),
        other => panic!("the live event, no bookmark: {other:?}"),
    }
}

#[tokio::test]
async fn streaming_list_parameters_are_validated_as_upstream() {
    let env = TestEnv::start().await.unwrap();
    let invalid = |c: &[(&str, &str)]| {
        let joined: Vec<String> = c.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let summary = match joined.len() {
            1 => joined[0].clone(),
            _ => format!("[{}]", joined.join(", ")),
        };
        (
            422,
            format!("ListOptions.meta.k8s.io \"\" is invalid: {summary}"),
            causes(c),
        )
    };
    let cases: [(&str, &[(&str, &str)]); 4] = [
        (
            "/api/v1/nodes?watch=1&sendInitialEvents=true&allowWatchBookmarks=true",
            &[(
                "resourceVersionMatch",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            )],
        ),
        (
            "/api/v1/nodes?watch=1&resourceVersion=1&resourceVersionMatch=NotOlderThan",
            &[(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            )],
        ),
        (
            "/api/v1/nodes?watch=1&sendInitialEvents=true&resourceVersionMatch=Exact",
            &[
                (
                    "resourceVersionMatch",
                    "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ),
                (
                    "resourceVersionMatch",
                    "Unsupported value: \"Exact\": supported values: \"NotOlderThan\"",
                ),
            ],
        ),
        (
            "/api/v1/nodes?sendInitialEvents=false",
            &[(
                "sendInitialEvents",
                "Forbidden: sendInitialEvents is forbidden for list",
            )],
        ),
    ];
    for (path, want) in cases {
        assert_eq!(refusal(&env, path).await, invalid(want), "{path}");
    }
}

#[tokio::test]
async fn older_servers_refuse_or_ignore_streaming_lists() {
    use kube_testenv::WatchListSupport;
    let watch_list = "/api/v1/nodes?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=";
    let gate_off = TestEnv::builder()
        .watch_list(WatchListSupport::GateDisabled)
        .start()
        .await
        .unwrap();
    let (code, message, why) = refusal(&gate_off, watch_list).await;
    assert_eq!(code, 422);
    assert_eq!(
        why,
        causes(&[(
            "sendInitialEvents",
            "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
        )]),
        "{message}"
    );

    let v1_23 = TestEnv::builder()
        .watch_list(WatchListSupport::V1_23)
        .start()
        .await
        .unwrap();
    let (code, message, why) = refusal(&v1_23, watch_list).await;
    assert_eq!(code, 422);
    assert_eq!(
        message,
        "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided]"
    );
    assert_eq!(why.len(), 2);
    // The parameter itself is unknown to v1.23: a list carrying it is served.
    let req = http::Request::get("/api/v1/nodes?sendInitialEvents=true")
        .body(Vec::new())
        .unwrap();
    assert!(v1_23.client().request_text(req).await.is_ok());

    // A server that drops both parameters serves a plain watch: ADDED, no end bookmark.
    let ignoring = TestEnv::builder()
        .watch_list(WatchListSupport::Ignored)
        .start()
        .await
        .unwrap();
    let nodes_ignoring: Api<Node> = Api::all(ignoring.client());
    nodes_ignoring
        .create(&PostParams::default(), &node("old"))
        .await
        .unwrap();
    let wp = WatchParams::streaming_lists();
    let mut stream = nodes_ignoring.watch(&wp, "").await.unwrap().boxed();
    assert!(matches!(
        stream.try_next().await.unwrap().unwrap(),
        WatchEvent::Added(_)
    ));
    nodes_ignoring
        .create(&PostParams::default(), &node("new"))
        .await
        .unwrap();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(n) => assert_eq!(n.metadata.name.as_deref(), Some("new")),
        other => panic!("a live event, no bookmark: {other:?}"),
    }
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
