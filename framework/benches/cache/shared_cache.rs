//! Scenario 1, run in a child process: K controllers, each reconciling every Node and every
//! Service, built (a) on our `SharedInformerFactory` (one informer per kind, K handlers, K queues,
//! K `Controller`s) or (b) as K pairs of kube-runtime `Controller`s (one per kind, since a
//! kube-runtime `Controller` reconciles one kind), each with its own watcher and store.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller_manager::controller::{Action, Controller, Request};
use controller_manager::informer::{Event, ObjectKey, SharedInformerFactory};
use controller_manager::workqueue::{ItemExponential, WorkQueue};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, Client};
use kube_runtime::controller::Action as KubeAction;
use kube_runtime::watcher;
use tokio_util::sync::CancellationToken;

use crate::progress::Progress;
use crate::report::{Figures, secs};

/// How long a scenario idles after its first pass before steady figures are read.
pub const SETTLE: Duration = Duration::from_secs(3);

/// The key one of our controllers queues: both kinds share one lane, as a controller watching
/// Nodes and Services does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Node(ObjectKey),
    Service(ObjectKey),
}

/// (a): one shared informer per kind feeding `k` controllers.
pub async fn ours(client: Client, k: usize) -> anyhow::Result<Figures> {
    let mut figures = Figures::begin();
    let start = Instant::now();
    let factory = SharedInformerFactory::new(client);
    let nodes = factory.informer::<Node>();
    let services = factory.informer::<Service>();
    let progress = Arc::new(Progress::default());
    let mut controllers = Vec::with_capacity(k);
    for i in 0..k {
        let name = format!("controller-{i}");
        let queue: WorkQueue<Key> = WorkQueue::new(name.clone(), ItemExponential::default());
        let q = queue.clone();
        nodes
            .add_handler(move |e: &Event<Node>| {
                q.add(Key::Node(ObjectKey::from_object(e.object().as_ref())))
            })
            .detach();
        let q = queue.clone();
        services
            .add_handler(move |e: &Event<Service>| {
                q.add(Key::Service(ObjectKey::from_object(e.object().as_ref())))
            })
            .detach();
        let p = Arc::clone(&progress);
        let service = tower::service_fn(move |_req: Request<Key>| {
            p.reconciled();
            std::future::ready(Ok::<_, Infallible>(Action::Done))
        });
        controllers.push(Controller::new(name, queue, service).workers(2));
    }
    let shutdown = CancellationToken::new();
    factory.start(shutdown.clone());
    factory.wait_for_sync(Duration::from_secs(900)).await?;
    figures.sync_s = Some(secs(start.elapsed()));
    figures.objects = nodes.store().len() + services.store().len();
    progress.set_target(k * figures.objects);
    for c in controllers {
        tokio::spawn(c.run(shutdown.clone()));
    }
    progress.wait().await;
    figures.first_pass_s = Some(secs(start.elapsed()));
    tokio::time::sleep(SETTLE).await;
    figures.settle();
    shutdown.cancel();
    Ok(figures)
}

/// Heap one work queue still holds after `n` distinct keys went through it once and it drained:
/// the part of (a)'s memory that grows with K once the first pass is over.
pub async fn queue_retained(n: usize) -> anyhow::Result<Figures> {
    let keys: Vec<Key> = (0..n)
        .map(|i| {
            Key::Service(ObjectKey::namespaced(
                format!("bench-{}", i % 20),
                format!("app-{i:05}"),
            ))
        })
        .collect();
    let mut figures = Figures::begin();
    figures.objects = n;
    let queue: WorkQueue<Key> = WorkQueue::new("retained", ItemExponential::default());
    for key in &keys {
        queue.add(key.clone());
    }
    while !queue.is_empty() {
        if let Some(key) = queue.get().await {
            queue.done(&key);
        }
    }
    figures.settle();
    Ok(figures)
}

/// Waits until a kube-runtime store has its first list.
///
/// `Store::wait_until_ready` cannot be awaited here: in kube-runtime 5.0 it wraps a futures
/// `oneshot::Receiver`, which keeps only the last poller's waker, and the controller's own applier
/// is already waiting on the same store, so one of the two is never woken. Once the store is
/// ready every poll returns at once, so polling each millisecond is exact to 1 ms.
pub async fn kube_store_ready<K>(store: &kube_runtime::reflector::Store<K>)
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    loop {
        if let Some(ready) = futures::FutureExt::now_or_never(store.wait_until_ready()) {
            if ready.is_err() {
                tracing::error!("kube-runtime store writer dropped before the first list");
            }
            return;
        }
        tick.tick().await;
    }
}

async fn reconcile<K>(_obj: Arc<K>, progress: Arc<Progress>) -> Result<KubeAction, Infallible> {
    progress.reconciled();
    Ok(KubeAction::await_change())
}

fn error_policy<K>(_obj: Arc<K>, _err: &Infallible, _progress: Arc<Progress>) -> KubeAction {
    KubeAction::await_change()
}

/// (b): `k` independent kube-runtime controllers per kind, default `watcher::Config`.
pub async fn kube_runtime(client: Client, k: usize) -> anyhow::Result<Figures> {
    let mut figures = Figures::begin();
    let start = Instant::now();
    let progress = Arc::new(Progress::default());
    let mut node_stores = Vec::with_capacity(k);
    let mut service_stores = Vec::with_capacity(k);
    for _ in 0..k {
        let c = kube_runtime::Controller::new(
            Api::<Node>::all(client.clone()),
            watcher::Config::default(),
        );
        node_stores.push(c.store());
        let run = c.run(reconcile, error_policy, Arc::clone(&progress));
        tokio::spawn(run.for_each(|_| std::future::ready(())));
        let c = kube_runtime::Controller::new(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
        );
        service_stores.push(c.store());
        let run = c.run(reconcile, error_policy, Arc::clone(&progress));
        tokio::spawn(run.for_each(|_| std::future::ready(())));
    }
    for s in &node_stores {
        kube_store_ready(s).await;
    }
    for s in &service_stores {
        kube_store_ready(s).await;
    }
    figures.sync_s = Some(secs(start.elapsed()));
    figures.objects = node_stores[0].len() + service_stores[0].len();
    progress.set_target(k * figures.objects);
    progress.wait().await;
    figures.first_pass_s = Some(secs(start.elapsed()));
    tokio::time::sleep(SETTLE).await;
    figures.settle();
    Ok(figures)
}
