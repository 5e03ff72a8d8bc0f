//! Shared harness of the service controller's end-to-end tests: kube-testenv, the fake cloud, and
//! a cache that stands in for the informers. [`Cache::refresh`] lists Services and Nodes from the
//! API server, so each test decides exactly what the controller's cache has seen (including stale
//! views).
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cloud_controllers::cloud::CloudProvider;
use cloud_controllers::event_sink::RecordedEvents;
use cloud_controllers::service::{
    NodeLister, NodeRevision, ServiceController, ServiceLister, ServiceMetrics, ServiceSyncError,
};
use fake_cloud::{FakeCloud, Method};
use k8s_openapi::api::core::v1::{Node, Service, ServicePort, ServiceSpec};
use kube::api::{Api, ListParams, PostParams};
use kube_testenv::TestEnv;
use parking_lot::Mutex;

pub const CLUSTER: &str = "kubernetes";
pub const KEY: &str = "default/web";

/// What an informer cache would hold; refreshed explicitly from the API server.
/// Each change of its Nodes bumps `revision`, as the informer's Node handler does after the
/// store took a change.
#[derive(Default)]
pub struct Cache {
    pub services: Mutex<HashMap<(String, String), Arc<Service>>>,
    nodes: Mutex<Vec<Arc<Node>>>,
    pub revision: NodeRevision,
}

impl ServiceLister for Cache {
    fn get(&self, ns: &str, name: &str) -> Option<Arc<Service>> {
        self.services
            .lock()
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }
}

impl NodeLister for Cache {
    fn list(&self) -> Vec<Arc<Node>> {
        self.nodes.lock().clone()
    }
}

impl Cache {
    pub async fn refresh(&self, client: &kube::Client) {
        let services = Api::<Service>::all(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        *self.services.lock() = services
            .items
            .into_iter()
            .map(|s| {
                let key = (
                    s.metadata.namespace.clone().unwrap(),
                    s.metadata.name.clone().unwrap(),
                );
                (key, Arc::new(s))
            })
            .collect();
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        *self.nodes.lock() = nodes.items.into_iter().map(Arc::new).collect();
        self.revision.bump();
    }

    /// A Node joins the cache (as its informer would see it), without the API.
    pub fn add_node(&self, node: Node) {
        self.nodes.lock().push(Arc::new(node));
        self.revision.bump();
    }
}

pub struct Harness {
    pub env: TestEnv,
    pub client: kube::Client,
    pub cloud: FakeCloud,
    pub cache: Arc<Cache>,
    pub events: RecordedEvents,
    pub metrics: ServiceMetrics,
    pub ctl: Arc<ServiceController>,
}

pub fn node(name: &str) -> Node {
    fake_cloud::objects::node(name, Some(&format!("fake://{name}")))
}

pub fn lb_service(name: &str) -> Service {
    let mut svc = Service {
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            selector: Some(BTreeMap::from([("app".into(), name.into())])),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    svc.metadata.name = Some(name.into());
    svc
}

pub async fn harness(nodes: &[&str]) -> Harness {
    let cloud = FakeCloud::new();
    harness_with(nodes, cloud.clone(), Arc::new(cloud)).await
}

/// A harness whose controller talks to `provider` (e.g. a wrapper around `cloud`), while tests
/// inspect `cloud`.
pub async fn harness_with(
    nodes: &[&str],
    cloud: FakeCloud,
    provider: Arc<dyn CloudProvider>,
) -> Harness {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    for n in nodes {
        Api::<Node>::all(client.clone())
            .create(&PostParams::default(), &node(n))
            .await
            .unwrap();
    }
    let cache = Arc::new(Cache::default());
    let events = RecordedEvents::default();
    let metrics = ServiceMetrics::default();
    let ctl = ServiceController::new(
        provider,
        client.clone(),
        CLUSTER,
        cache.clone(),
        cache.clone(),
        Arc::new(events.clone()),
    )
    .unwrap()
    .with_metrics(metrics.clone())
    .with_node_revision(cache.revision.clone());
    let ctl = Arc::new(ctl);
    Harness {
        env,
        client,
        cloud,
        cache,
        events,
        metrics,
        ctl,
    }
}

impl Harness {
    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.client.clone(), "default")
    }

    pub async fn create(&self, svc: &Service) -> Service {
        let created = self
            .services()
            .create(&PostParams::default(), svc)
            .await
            .unwrap();
        self.cache.refresh(&self.client).await;
        created
    }

    pub async fn get(&self, name: &str) -> Option<Service> {
        self.services().get_opt(name).await.unwrap()
    }

    pub async fn sync(&self) -> Result<(), ServiceSyncError> {
        self.cache.refresh(&self.client).await;
        self.ctl.sync_service(KEY).await
    }

    /// Node `name` joins: created through the API, then seen by the cache.
    pub async fn join_node(&self, name: &str) {
        Api::<Node>::all(self.client.clone())
            .create(&PostParams::default(), &node(name))
            .await
            .unwrap();
        self.cache.refresh(&self.client).await;
    }

    pub fn calls(&self, method: Method) -> usize {
        self.cloud.calls_to(method).len()
    }

    pub fn clear(&self) {
        self.cloud.clear_calls();
        self.env.clear_requests();
    }

    pub async fn provision(&self) -> Service {
        self.create(&lb_service("web")).await;
        self.ctl.sync_service(KEY).await.unwrap();
        self.cache.refresh(&self.client).await;
        self.get("web").await.unwrap()
    }

    /// Creates and syncs `n` LoadBalancer Services `lb-000`…, returning their keys.
    pub async fn provision_many(&self, n: usize) -> Vec<String> {
        let names: Vec<String> = (0..n).map(|i| format!("lb-{i:03}")).collect();
        for name in &names {
            self.services()
                .create(&PostParams::default(), &lb_service(name))
                .await
                .unwrap();
        }
        self.cache.refresh(&self.client).await;
        let keys: Vec<String> = names.iter().map(|n| format!("default/{n}")).collect();
        for key in &keys {
            self.ctl.sync_service(key).await.unwrap();
        }
        keys
    }

    /// `UpdateLoadBalancer` calls per Service key.
    pub fn updates_per_lb(&self) -> BTreeMap<String, usize> {
        let mut per = BTreeMap::new();
        for call in self.cloud.calls_to(Method::UpdateLoadBalancer) {
            *per.entry(call.key).or_default() += 1;
        }
        per
    }
}

pub fn finalizers(svc: &Service) -> Vec<String> {
    svc.metadata.finalizers.clone().unwrap_or_default()
}

pub fn ingress_ips(svc: &Service) -> Vec<String> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|i| i.iter().filter_map(|i| i.ip.clone()).collect())
        .unwrap_or_default()
}

pub fn status_patches(env: &TestEnv) -> usize {
    env.requests()
        .iter()
        .filter(|r| {
            r.verb == "patch"
                && r.resource == "services"
                && r.subresource.as_deref() == Some("status")
        })
        .count()
}
