//! The shared informer over kube's real client and kube-runtime's real watcher, against a small
//! in-process API server double that speaks the list/watch wire format and logs every request.
//!
//! Proves what the unit tests cannot: several handlers on one kind cost one LIST and one WATCH,
//! lists use `resourceVersion=0`, namespaces and selectors reach the URL, and a 410 Gone leads to
//! a relist whose vanished objects are delivered as deletes.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use controller_manager::informer::{
    Event, HandlerRegistration, Informer, InformerScope, SharedInformerFactory,
};
use futures::StreamExt;
use futures::channel::mpsc as fmpsc;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

type Body = BoxBody<Bytes, Infallible>;

/// Serves LIST from `lists[path]` and keeps every WATCH open until the test pushes to it.
#[derive(Clone, Default)]
struct FakeApiServer {
    state: Arc<Mutex<State>>,
    watch_opened: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct State {
    requests: Vec<String>,
    rv: u64,
    lists: HashMap<String, Vec<Value>>,
    watches: HashMap<String, Vec<fmpsc::UnboundedSender<Bytes>>>,
}

impl FakeApiServer {
    fn client(&self) -> kube::Client {
        let me = self.clone();
        let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let me = me.clone();
            async move { Ok::<_, Infallible>(me.handle(&req)) }
        });
        kube::Client::new(svc, "default")
    }

    fn handle(&self, req: &http::Request<kube::client::Body>) -> http::Response<Body> {
        let mut st = self.state.lock().expect("lock");
        st.requests.push(req.uri().to_string());
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or_default();
        if query.contains("watch=true") {
            let (tx, rx) = fmpsc::unbounded::<Bytes>();
            st.watches.entry(path).or_default().push(tx);
            self.watch_opened.notify_waiters();
            let body = StreamBody::new(rx.map(|b| Ok::<_, Infallible>(Frame::data(b))));
            return http::Response::new(BodyExt::boxed(body));
        }
        let items = st.lists.get(&path).cloned().unwrap_or_default();
        let list = json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": st.rv.to_string()}, "items": items});
        http::Response::new(BodyExt::boxed(Full::new(Bytes::from(list.to_string()))))
    }

    /// Sets what the next LIST of `path` returns.
    fn set_list(&self, path: &str, objects: Vec<Value>) {
        self.state
            .lock()
            .expect("lock")
            .lists
            .insert(path.to_string(), objects);
    }

    /// Waits until `path` has an open watch, so pushed events are not lost.
    async fn watching(&self, path: &str) {
        loop {
            let opened = self.watch_opened.notified();
            let open = self
                .state
                .lock()
                .expect("lock")
                .watches
                .get(path)
                .is_some_and(|w| !w.is_empty());
            if open {
                return;
            }
            opened.await;
        }
    }

    /// Streams one watch event to every open watch of `path`.
    fn push(&self, path: &str, kind: &str, object: Value) {
        let line = format!("{}\n", json!({"type": kind, "object": object}));
        let st = self.state.lock().expect("lock");
        for tx in st.watches.get(path).into_iter().flatten() {
            let _ = tx.unbounded_send(Bytes::from(line.clone()));
        }
    }

    /// Ends every watch of `path` with a 410 Expired error, as a server whose history moved on.
    fn expire(&self, path: &str) {
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "too old resource version", "reason": "Expired", "code": 410});
        self.push(path, "ERROR", status);
        self.state.lock().expect("lock").watches.remove(path);
    }

    fn requests(&self) -> Vec<String> {
        self.state.lock().expect("lock").requests.clone()
    }

    fn count(&self, path: &str, watch: bool) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.starts_with(&format!("{path}?")) && r.contains("watch=true") == watch)
            .count()
    }
}

fn node(name: &str, rv: u64) -> Value {
    let n = Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            resource_version: Some(rv.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    with_type(
        serde_json::to_value(n).expect("node json"),
        &Node::api_version(&()),
        &Node::kind(&()),
    )
}

fn service(ns: &str, name: &str, rv: u64) -> Value {
    let s = Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            resource_version: Some(rv.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    with_type(serde_json::to_value(s).expect("svc json"), "v1", "Service")
}

fn with_type(mut v: Value, api_version: &str, kind: &str) -> Value {
    v["apiVersion"] = json!(api_version);
    v["kind"] = json!(kind);
    v
}

/// Subscribes a handler that reports `add n@1` / `update n@1->2` / `delete n@1`.
fn subscribe<K>(informer: &Informer<K>) -> (mpsc::UnboundedReceiver<String>, HandlerRegistration)
where
    K: Resource + Send + Sync + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let reg = informer.add_handler(move |e: &Event<K>| {
        let id = |o: &K| {
            format!(
                "{}@{}",
                o.meta().name.clone().unwrap_or_default(),
                o.meta().resource_version.clone().unwrap_or_default()
            )
        };
        let line = match e {
            Event::Added(o) => format!("add {}", id(o)),
            Event::Updated { old, new } => format!(
                "update {}->{}",
                id(old),
                new.meta().resource_version.clone().unwrap_or_default()
            ),
            Event::Deleted(o) => format!("delete {}", id(o)),
        };
        let _ = tx.send(line);
    });
    (rx, reg)
}

async fn take(rx: &mut mpsc::UnboundedReceiver<String>, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(
            tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .expect("event in time")
                .expect("handler alive"),
        );
    }
    out.sort();
    out
}

const NODES: &str = "/api/v1/nodes";
const SERVICES: &str = "/api/v1/services";

#[tokio::test]
async fn handlers_share_one_list_and_watch_per_kind_and_see_relist_deletes() {
    let api = FakeApiServer::default();
    api.set_list(NODES, vec![node("n1", 1), node("n2", 2)]);
    api.set_list(SERVICES, vec![service("default", "s1", 3)]);
    let factory = SharedInformerFactory::new(api.client()).with_watch_list(false);

    let mut node_subs: Vec<_> = (0..3)
        .map(|_| subscribe(&factory.informer::<Node>()))
        .collect();
    let mut svc_subs: Vec<_> = (0..2)
        .map(|_| subscribe(&factory.informer::<Service>()))
        .collect();
    let shutdown = CancellationToken::new();
    factory.start(shutdown.clone());
    factory
        .wait_for_sync(Duration::from_secs(10))
        .await
        .expect("synced");

    for (rx, reg) in &mut node_subs {
        assert_eq!(take(rx, 2).await, ["add n1@1", "add n2@2"]);
        let _ = reg;
    }
    for (rx, _) in &mut svc_subs {
        assert_eq!(take(rx, 1).await, ["add s1@3"]);
    }
    api.watching(NODES).await;
    api.watching(SERVICES).await;
    // One LIST (from the watch cache) and one WATCH per kind, whatever the number of handlers.
    assert_eq!(
        (api.count(NODES, false), api.count(NODES, true)),
        (1, 1),
        "{:#?}",
        api.requests()
    );
    assert_eq!(
        (api.count(SERVICES, false), api.count(SERVICES, true)),
        (1, 1),
        "{:#?}",
        api.requests()
    );
    let node_list = api
        .requests()
        .into_iter()
        .find(|r| r.starts_with(NODES) && !r.contains("watch=true"))
        .expect("list");
    assert!(
        node_list.contains("resourceVersion=0")
            && node_list.contains("resourceVersionMatch=NotOlderThan"),
        "{node_list}"
    );

    api.push(NODES, "MODIFIED", node("n1", 4));
    api.push(NODES, "DELETED", node("n2", 5));
    api.push(NODES, "ADDED", node("n3", 6));
    api.push(SERVICES, "DELETED", service("default", "s1", 7));
    for (rx, _) in &mut node_subs {
        assert_eq!(
            take(rx, 3).await,
            ["add n3@6", "delete n2@5", "update n1@1->4"]
        );
    }
    for (rx, _) in &mut svc_subs {
        assert_eq!(take(rx, 1).await, ["delete s1@7"]);
    }

    // n3 is deleted and n4 created while the watch is down; the 410 forces a relist.
    api.set_list(NODES, vec![node("n1", 4), node("n4", 9)]);
    api.expire(NODES);
    api.watching(NODES).await;
    for (rx, _) in &mut node_subs {
        assert_eq!(
            take(rx, 3).await,
            ["add n4@9", "delete n3@6", "update n1@4->4"]
        );
    }
    assert_eq!(
        (api.count(NODES, false), api.count(NODES, true)),
        (2, 2),
        "{:#?}",
        api.requests()
    );
    assert_eq!(
        (api.count(SERVICES, false), api.count(SERVICES, true)),
        (1, 1)
    );
    let status = factory.informers_status();
    assert!(status.iter().all(|s| s.synced));
    assert_eq!(status[0].watch_errors, 1, "the 410 is counted: {status:?}");
    shutdown.cancel();
}

#[tokio::test]
async fn scope_reaches_the_url_as_namespace_and_selectors() {
    let api = FakeApiServer::default();
    let factory = SharedInformerFactory::new(api.client()).with_watch_list(false);
    let scoped = factory.informer_for::<Service>(
        InformerScope::all()
            .in_namespace("kube-system")
            .with_labels("app=dns")
            .with_fields("spec.type=LoadBalancer"),
    );
    factory.start(CancellationToken::new());
    assert!(scoped.wait_for_sync().await);
    let list = api.requests().into_iter().next().expect("one request");
    assert!(
        list.starts_with("/api/v1/namespaces/kube-system/services?"),
        "{list}"
    );
    assert!(list.contains("labelSelector=app%3Ddns"), "{list}");
    assert!(
        list.contains("fieldSelector=spec.type%3DLoadBalancer"),
        "{list}"
    );
}

#[tokio::test]
async fn paged_lists_are_quorum_reads_with_the_page_size() {
    let api = FakeApiServer::default();
    api.set_list(NODES, vec![node("n1", 1)]);
    let factory = SharedInformerFactory::new(api.client())
        .with_watch_list(false)
        .with_page_size(2);
    let nodes = factory.informer::<Node>();
    factory.start(CancellationToken::new());
    assert!(nodes.wait_for_sync().await);
    assert_eq!(nodes.store().len(), 1);
    let list = api.requests().into_iter().next().expect("one request");
    assert!(
        list.contains("limit=2") && !list.contains("resourceVersion="),
        "{list}"
    );
}
