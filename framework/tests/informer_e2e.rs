//! End to end over HTTP against the embedded API server (kube-testenv): five handlers on two
//! kinds cost one WATCH per kind (a streaming list, no LIST), and every handler sees adds,
//! updates and deletes, including deletes it can only learn from a relist after a 410 Gone,
//! which streams again; servers without streaming lists get one LIST + WATCH instead.

mod support;

use std::time::Duration;

use controller_manager::informer::{
    Event, HandlerRegistration, Informer, InformerScope, SharedInformerFactory,
};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use kube_testenv::{TestEnv, WatchListSupport};
use support::count;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// Subscribes a handler that reports `add n1`, `update n1`, `update n1 (same)`, `delete n1`.
fn subscribe<K>(informer: &Informer<K>) -> (mpsc::UnboundedReceiver<String>, HandlerRegistration)
where
    K: Resource + Send + Sync + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let reg = informer.add_handler(move |e: &Event<K>| {
        let name = |o: &K| o.meta().name.clone().unwrap_or_default();
        let line = match e {
            Event::Added(o) => format!("add {}", name(o)),
            Event::Updated { old, new }
                if old.meta().resource_version == new.meta().resource_version =>
            {
                format!("update {} (same)", name(new))
            }
            Event::Updated { new, .. } => format!("update {}", name(new)),
            Event::Deleted(o) => format!("delete {}", name(o)),
        };
        let _ = tx.send(line);
    });
    (rx, reg)
}

/// The next `n` events of one handler, sorted (the order across objects in a list is unspecified).
async fn take(rx: &mut mpsc::UnboundedReceiver<String>, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        let next = tokio::time::timeout(WAIT, rx.recv()).await;
        out.push(next.expect("event in time").expect("handler alive"));
    }
    out.sort();
    out
}

/// How many streaming lists (WATCHes with `sendInitialEvents=true`) of `resource` were served.
fn streaming(env: &TestEnv, resource: &str) -> usize {
    env.requests()
        .iter()
        .filter(|r| r.verb == "watch" && r.resource == resource)
        .filter(|r| r.query.contains("sendInitialEvents=true"))
        .count()
}

/// Polls a condition the public API offers no future for (a watch error seen by the informer).
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn service(name: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("e2e".to_string(), "yes".to_string())].into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A write elsewhere, so the server's resourceVersion moves past every informer's.
async fn bump(env: &TestEnv) -> kube::Result<ConfigMap> {
    let bump = ConfigMap {
        metadata: ObjectMeta {
            name: Some("bump".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(env.client(), "default")
        .create(&PostParams::default(), &bump)
        .await
}

fn label_patch() -> Patch<serde_json::Value> {
    Patch::Merge(serde_json::json!({"metadata": {"labels": {"touched": "yes"}}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_handlers_share_one_watch_per_kind_and_see_relist_deletes() -> anyhow::Result<()> {
    // No bookmark may move an informer to the latest resourceVersion during the test.
    let env = TestEnv::builder()
        .bookmark_interval(Duration::from_secs(3600))
        .start()
        .await?;
    let client = env.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    for n in ["n1", "n2", "n3"] {
        nodes.create(&PostParams::default(), &node(n)).await?;
    }
    for s in ["s1", "s2"] {
        services.create(&PostParams::default(), &service(s)).await?;
    }
    env.clear_requests();

    let factory = SharedInformerFactory::new(client);
    let svc_scope = InformerScope::all().with_labels("e2e=yes");
    let mut node_subs: Vec<_> = (0..3)
        .map(|_| subscribe(&factory.informer::<Node>()))
        .collect();
    let mut svc_subs: Vec<_> = (0..2)
        .map(|_| subscribe(&factory.informer_for::<Service>(svc_scope.clone())))
        .collect();
    let shutdown = CancellationToken::new();
    factory.start(shutdown.clone());
    factory.wait_for_sync(WAIT).await?;

    for (rx, _) in &mut node_subs {
        assert_eq!(take(rx, 3).await, ["add n1", "add n2", "add n3"]);
    }
    for (rx, _) in &mut svc_subs {
        assert_eq!(take(rx, 2).await, ["add s1", "add s2"]);
    }

    // Changes through the open watches.
    nodes
        .patch("n1", &PatchParams::default(), &label_patch())
        .await?;
    nodes.delete("n2", &DeleteParams::default()).await?;
    services
        .patch("s1", &PatchParams::default(), &label_patch())
        .await?;
    for (rx, _) in &mut node_subs {
        assert_eq!(take(rx, 2).await, ["delete n2", "update n1"]);
    }
    for (rx, _) in &mut svc_subs {
        assert_eq!(take(rx, 1).await, ["update s1"]);
    }
    // Those changes came through the streaming lists' watches: no LIST, one WATCH per kind.
    for resource in ["nodes", "services"] {
        assert_eq!(
            (
                count(&env, "list", resource),
                count(&env, "watch", resource),
                streaming(&env, resource)
            ),
            (0, 1, 1),
            "{:#?}",
            env.requests()
        );
    }

    // A write elsewhere moves the server past both informers' resourceVersions; then history is
    // compacted and watches cut, so each informer's re-watch gets 410 Gone and backs off before
    // relisting. Objects deleted meanwhile can only be discovered by the relist.
    let node_informer = factory.informer::<Node>();
    let svc_informer = factory.informer_for::<Service>(svc_scope.clone());
    bump(&env).await?;
    env.faults().expire_history();
    env.faults().close_watches();
    eventually("both informers to see 410 Gone", || {
        node_informer.watch_errors() >= 1 && svc_informer.watch_errors() >= 1
    })
    .await;
    nodes.delete("n3", &DeleteParams::default()).await?;
    services.delete("s2", &DeleteParams::default()).await?;
    // Backoff after an error is at least 800 ms, so neither informer has relisted yet: the
    // deletes can only reach the handlers through the relist's diff.
    assert_eq!(streaming(&env, "nodes"), 1);
    assert_eq!(streaming(&env, "services"), 1);
    for (rx, _) in &mut node_subs {
        assert_eq!(take(rx, 2).await, ["delete n3", "update n1 (same)"]);
    }
    for (rx, _) in &mut svc_subs {
        assert_eq!(take(rx, 2).await, ["delete s2", "update s1 (same)"]);
    }
    // The relist after 410 was a streaming list too: still no LIST.
    for resource in ["nodes", "services"] {
        assert_eq!(
            (count(&env, "list", resource), streaming(&env, resource)),
            (0, 2),
            "{:#?}",
            env.requests()
        );
    }
    assert_eq!(node_informer.store().len(), 1);
    shutdown.cancel();
    Ok(())
}

/// (verb, HTTP status) of every LIST and WATCH of `resource`, in order.
fn calls(env: &TestEnv, resource: &str) -> Vec<(String, u16)> {
    env.requests()
        .into_iter()
        .filter(|r| r.resource == resource && (r.verb == "list" || r.verb == "watch"))
        .map(|r| (r.verb, r.status))
        .collect()
}

/// A Node informer of a default factory with one handler, and what the tests drive it with.
struct Synced {
    nodes: Api<Node>,
    informer: Informer<Node>,
    rx: mpsc::UnboundedReceiver<String>,
    _reg: HandlerRegistration,
    shutdown: CancellationToken,
}

/// Nodes n1 and n2, then a default factory's Node informer with one handler, synced (it saw
/// both) and watching (it saw n1 deleted).
async fn synced_informer(env: &TestEnv) -> anyhow::Result<Synced> {
    let nodes: Api<Node> = Api::all(env.client());
    for n in ["n1", "n2"] {
        nodes.create(&PostParams::default(), &node(n)).await?;
    }
    env.clear_requests();
    let factory = SharedInformerFactory::new(env.client());
    let informer = factory.informer::<Node>();
    let (mut rx, reg) = subscribe(&informer);
    let shutdown = CancellationToken::new();
    factory.start(shutdown.clone());
    factory.wait_for_sync(WAIT).await?;
    assert_eq!(take(&mut rx, 2).await, ["add n1", "add n2"]);
    nodes.delete("n1", &DeleteParams::default()).await?;
    assert_eq!(take(&mut rx, 1).await, ["delete n1"]);
    Ok(Synced {
        nodes,
        informer,
        rx,
        _reg: reg,
        shutdown,
    })
}

#[tokio::test]
async fn a_v1_23_server_refuses_streaming_lists_so_the_informer_lists_and_remembers()
-> anyhow::Result<()> {
    let env = TestEnv::builder()
        .watch_list(WatchListSupport::V1_23)
        .bookmark_interval(Duration::from_secs(3600))
        .start()
        .await?;
    let Synced {
        nodes,
        informer,
        mut rx,
        _reg,
        shutdown,
    } = synced_informer(&env).await?;
    let expected = |s: &[(&str, u16)]| -> Vec<(String, u16)> {
        s.iter().map(|(v, c)| (v.to_string(), *c)).collect()
    };
    assert_eq!(
        calls(&env, "nodes"),
        expected(&[("watch", 422), ("list", 200), ("watch", 200)])
    );

    // After a 410 Gone it relists with a LIST straight away: the refusal is remembered.
    nodes.create(&PostParams::default(), &node("n3")).await?;
    assert_eq!(take(&mut rx, 1).await, ["add n3"]);
    bump(&env).await?;
    env.faults().expire_history();
    env.faults().close_watches();
    eventually("the informer to see 410 Gone", || {
        informer.watch_errors() >= 1
    })
    .await;
    nodes.delete("n2", &DeleteParams::default()).await?;
    assert_eq!(take(&mut rx, 2).await, ["delete n2", "update n3 (same)"]);
    // (The re-watch that got 410, then the relist; its WATCH may still be on its way.)
    let after = calls(&env, "nodes");
    assert_eq!(
        after[3..5],
        expected(&[("watch", 200), ("list", 200)])[..],
        "{after:?}"
    );
    assert_eq!(after.iter().filter(|(_, c)| *c == 422).count(), 1);
    shutdown.cancel();
    Ok(())
}

#[tokio::test]
async fn streaming_lists_are_the_default_and_sync_from_one_watch_without_a_list()
-> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let _running = synced_informer(&env).await?;

    let requests = env.requests();
    assert_eq!(count(&env, "list", "nodes"), 0, "{requests:#?}");
    let watches: Vec<_> = requests.iter().filter(|r| r.verb == "watch").collect();
    assert_eq!(watches.len(), 1, "{requests:#?}");
    for param in [
        "sendInitialEvents=true",
        "resourceVersionMatch=NotOlderThan",
        "allowWatchBookmarks=true",
        "resourceVersion=&",
    ] {
        assert!(
            format!("{}&", watches[0].query).contains(param),
            "{param} in {:?}",
            watches[0].query
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_server_ignoring_streaming_lists_is_caught_by_its_first_change_and_listed() {
    let env = TestEnv::builder()
        .watch_list(WatchListSupport::Ignored)
        .start()
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    nodes
        .create(&PostParams::default(), &node("n1"))
        .await
        .unwrap();
    env.clear_requests();
    let factory = SharedInformerFactory::new(env.client());
    let informer = factory.informer::<Node>();
    factory.start(CancellationToken::new());
    // The plain watch it got sends n1 as ADDED and no end bookmark, so it cannot sync...
    eventually("the streaming list to be open", || env.open_watches() == 1).await;
    assert!(!informer.has_synced());
    // ...until a MODIFIED proves the server ignored the request: then LIST + WATCH.
    nodes
        .patch("n1", &PatchParams::default(), &label_patch())
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(WAIT, informer.wait_for_sync())
            .await
            .unwrap()
    );
    let cached = informer.store().list();
    assert_eq!(cached.len(), 1);
    assert!(cached[0].metadata.labels.is_some(), "{cached:?}");
    // The ignored streaming list, then the LIST (its WATCH may still be on its way).
    assert_eq!(
        calls(&env, "nodes")[..2],
        [("watch".to_string(), 200), ("list".into(), 200)]
    );
}
