//! End to end over HTTP against the embedded API server (kube-testenv): five handlers on two
//! kinds cost one LIST and one WATCH per kind, and every handler sees adds, updates and deletes,
//! including deletes it can only learn from a relist after a 410 Gone.

mod support;

use std::time::Duration;

use controller_manager::informer::{
    Event, HandlerRegistration, Informer, InformerScope, SharedInformerFactory,
};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use kube_testenv::TestEnv;
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
    // Those changes came through watches, so both are open: one LIST and one WATCH per kind.
    assert_eq!(
        (count(&env, "list", "nodes"), count(&env, "watch", "nodes")),
        (1, 1),
        "{:#?}",
        env.requests()
    );
    assert_eq!(
        (
            count(&env, "list", "services"),
            count(&env, "watch", "services")
        ),
        (1, 1),
        "{:#?}",
        env.requests()
    );

    // A write elsewhere moves the server past both informers' resourceVersions; then history is
    // compacted and watches cut, so each informer's re-watch gets 410 Gone and backs off before
    // relisting. Objects deleted meanwhile can only be discovered by the relist.
    let node_informer = factory.informer::<Node>();
    let svc_informer = factory.informer_for::<Service>(svc_scope.clone());
    let bump = ConfigMap {
        metadata: ObjectMeta {
            name: Some("bump".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(env.client(), "default")
        .create(&PostParams::default(), &bump)
        .await?;
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
    assert_eq!(count(&env, "list", "nodes"), 1);
    assert_eq!(count(&env, "list", "services"), 1);
    for (rx, _) in &mut node_subs {
        assert_eq!(take(rx, 2).await, ["delete n3", "update n1 (same)"]);
    }
    for (rx, _) in &mut svc_subs {
        assert_eq!(take(rx, 2).await, ["delete s2", "update s1 (same)"]);
    }
    assert_eq!(count(&env, "list", "nodes"), 2);
    assert_eq!(count(&env, "list", "services"), 2);
    assert_eq!(node_informer.store().len(), 1);
    shutdown.cancel();
    Ok(())
}

#[tokio::test]
async fn streaming_lists_sync_from_one_watch_without_a_list() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let nodes: Api<Node> = Api::all(env.client());
    for n in ["n1", "n2"] {
        nodes.create(&PostParams::default(), &node(n)).await?;
    }
    env.clear_requests();
    let factory = SharedInformerFactory::new(env.client()).with_streaming_lists();
    let informer = factory.informer::<Node>();
    let (mut rx, _reg) = subscribe(&informer);
    factory.start(CancellationToken::new());
    factory.wait_for_sync(WAIT).await?;
    assert_eq!(take(&mut rx, 2).await, ["add n1", "add n2"]);
    nodes.delete("n1", &DeleteParams::default()).await?;
    assert_eq!(take(&mut rx, 1).await, ["delete n1"]);

    let requests = env.requests();
    assert_eq!(count(&env, "list", "nodes"), 0, "{requests:#?}");
    let watches: Vec<_> = requests.iter().filter(|r| r.verb == "watch").collect();
    assert_eq!(watches.len(), 1, "{requests:#?}");
    assert!(
        watches[0].query.contains("sendInitialEvents=true"),
        "{:?}",
        watches[0].query
    );
    Ok(())
}
