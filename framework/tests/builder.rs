//! The controller builder end to end over HTTP against kube-testenv: an owned object's change
//! enqueues its controlling owner, a watched kind's mapper enqueues what it names, a predicate
//! drops the primary updates it rejects, and a builder-made controller shares every informer
//! with a hand-wired one (one LIST and one WATCH per kind for the process).

mod support;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use controller_manager::builder::{ControllerBuilder, predicates};
use controller_manager::controller::{Action, Controller, Request};
use controller_manager::informer::{Event, ObjectKey};
use controller_manager::manager::{
    InitContext, InitOutcome, Initializer, Initializers, Manager, ManagerConfig,
};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, ResourceExt};
use kube_testenv::TestEnv;
use parking_lot::Mutex;
use serde_json::json;
use support::shut_down;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// Every key the builder's controller reconciled, in order.
#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl Log {
    fn count(&self, key: &str) -> usize {
        self.0.lock().iter().filter(|k| *k == key).count()
    }
}

/// Services, reconciled again when a ConfigMap they control changes, when a Node labelled
/// `serves=<service>` changes, and on Service updates only when labels change.
fn builder_controller() -> Initializer<Arc<Log>> {
    Initializer::new("svc-builder", |ctx: InitContext<Arc<Log>>| async move {
        let log = ctx.extra.clone();
        let reconciler = tower::service_fn(move |req: Request<ObjectKey>| {
            log.0.lock().push(req.key.to_string());
            async { Ok::<_, Infallible>(Action::Done) }
        });
        Ok(ControllerBuilder::<Service>::new(&ctx)
            .owns::<ConfigMap>()
            .watches::<Node, _>(|n: &Node| {
                n.labels()
                    .get("serves")
                    .map(|s| ObjectKey::namespaced("default", s))
            })
            .with_predicate(predicates::labels_changed)
            .workers(1)
            .start(reconciler))
    })
}

/// A hand-wired controller on the same kinds, to show the informers are shared.
fn plain_controller() -> Initializer<Arc<Log>> {
    Initializer::new("plain", |ctx: InitContext<Arc<Log>>| async move {
        let queue = ctx.queue::<String>("plain", ctx.default_rate_limiter());
        for_each_kind(&ctx, &queue);
        let svc =
            tower::service_fn(|_: Request<String>| async { Ok::<_, Infallible>(Action::Done) });
        let stop = ctx.shutdown.clone();
        Ok(InitOutcome::Started(Box::pin(
            Controller::new("plain", queue, svc).run(stop),
        )))
    })
}

fn for_each_kind(
    ctx: &InitContext<Arc<Log>>,
    queue: &controller_manager::workqueue::WorkQueue<String>,
) {
    let q = queue.clone();
    ctx.factory
        .informer::<Service>()
        .add_handler(move |e: &Event<Service>| q.add(e.object().name_any()))
        .detach();
    let q = queue.clone();
    ctx.factory
        .informer::<ConfigMap>()
        .add_handler(move |e: &Event<ConfigMap>| q.add(e.object().name_any()))
        .detach();
    let q = queue.clone();
    ctx.factory
        .informer::<Node>()
        .add_handler(move |e: &Event<Node>| q.add(e.object().name_any()))
        .detach();
}

async fn eventually(log: &Log, what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        let reconciled = log.0.lock().clone();
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out: {what}; reconciled: {reconciled:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn create<K>(api: &Api<K>, obj: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

async fn merge<K>(api: &Api<K>, name: &str, patch: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn owned_watched_and_filtered_events_reach_the_owner_through_shared_informers() {
    let env = TestEnv::start().await.unwrap();
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let nodes: Api<Node> = Api::all(env.client());
    let spec = json!({"ports": [{"port": 80}]});
    let web = create(
        &services,
        json!({"metadata": {"name": "web"}, "spec": spec}),
    )
    .await;
    create::<Service>(
        &services,
        json!({"metadata": {"name": "sentinel"}, "spec": spec}),
    )
    .await;
    let owner = json!({"apiVersion": "v1", "kind": "Service", "name": "web", "uid": web.uid(), "controller": true});
    create::<ConfigMap>(
        &configmaps,
        json!({"metadata": {"name": "web-config", "ownerReferences": [owner]}}),
    )
    .await;
    env.clear_requests();

    let log = Arc::new(Log::default());
    let mut config = ManagerConfig::new("builder-test");
    config.graceful_shutdown_timeout = Duration::from_secs(5);
    let manager = Manager::new(config, env.client(), log.clone()).with_initializers(
        Initializers::new()
            .with(builder_controller())
            .with(plain_controller()),
    );
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));

    let web_count = || log.count("default/web");
    let sentinel_count = || log.count("default/sentinel");
    eventually(&log, "initial list reconciled", || {
        web_count() >= 1 && sentinel_count() == 1
    })
    .await;
    // The initial list may enqueue web twice (itself, its ConfigMap). A ConfigMap owned by the
    // sentinel, created now, reaches the one-worker lane after both: once the sentinel is
    // reconciled again, web's initial reconciles are over.
    let sentinel = services.get("sentinel").await.unwrap();
    let owner = json!({"apiVersion": "v1", "kind": "Service", "name": "sentinel", "uid": sentinel.uid(), "controller": true});
    create::<ConfigMap>(
        &configmaps,
        json!({"metadata": {"name": "sentinel-config", "ownerReferences": [owner]}}),
    )
    .await;
    eventually(&log, "sentinel's ConfigMap enqueues it", || {
        sentinel_count() == 2
    })
    .await;
    let settled = web_count();

    // The owned ConfigMap changes: its controlling owner is reconciled.
    merge(&configmaps, "web-config", json!({"data": {"k": "v"}})).await;
    eventually(&log, "owned change enqueues the owner", || {
        web_count() == settled + 1
    })
    .await;

    // A watched Node whose mapper names web.
    create::<Node>(
        &nodes,
        json!({"metadata": {"name": "n1", "labels": {"serves": "web"}}}),
    )
    .await;
    eventually(&log, "watched kind's mapper enqueues", || {
        web_count() == settled + 2
    })
    .await;

    // An annotation-only update of web is filtered out by `labels_changed`. The sentinel's label
    // change comes after it through the same handler and the same one-worker lane, so once the
    // sentinel is reconciled, web would have been too had it been enqueued.
    merge(
        &services,
        "web",
        json!({"metadata": {"annotations": {"a": "b"}}}),
    )
    .await;
    merge(
        &services,
        "sentinel",
        json!({"metadata": {"labels": {"x": "y"}}}),
    )
    .await;
    eventually(&log, "sentinel's label change passes", || {
        sentinel_count() == 3
    })
    .await;
    assert_eq!(
        web_count(),
        settled + 2,
        "annotation-only update must not reconcile web"
    );

    // Deleting the owned ConfigMap reconciles the owner too.
    configmaps
        .delete("web-config", &DeleteParams::default())
        .await
        .unwrap();
    eventually(&log, "owned delete enqueues the owner", || {
        web_count() == settled + 3
    })
    .await;

    shut_down(&stop, run, WAIT).await;

    // Two controllers, three kinds: one streaming list (a WATCH, no LIST) each for the whole
    // process.
    for resource in ["services", "configmaps", "nodes"] {
        for (verb, want) in [("list", 0), ("watch", 1)] {
            let n = env
                .requests()
                .iter()
                .filter(|r| r.verb == verb && r.resource == resource)
                .count();
            assert_eq!(n, want, "{verb} {resource}");
        }
    }
}
