//! Shared harness of the reliability tests: a fleet of fake-cloud instances with matching
//! uninitialized Nodes, LoadBalancer Services, the stock controllers in a real `Manager`, API
//! writes that retry through injected faults, and a snapshot of "is everything converged?".
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cloud_controllers::cloud::CloudProvider;
use cloud_controllers::options::CloudOptions;
use cloud_controllers::service::predicates::LOAD_BALANCER_CLEANUP_FINALIZER;
use cloud_controllers::{CloudContext, cloud_initializers};
use controller_manager::manager::{Manager, ManagerConfig, ManagerError};
use fake_cloud::{FakeCloud, FakeInstance};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    cloud: CloudOptions,
}

/// The cloud flags as the binary would parse them from `args`.
pub fn options(args: &[&str]) -> CloudOptions {
    Flags::parse_from(std::iter::once("test").chain(args.iter().copied())).cloud
}

pub fn node_name(i: usize) -> String {
    format!("node-{i:04}")
}

pub fn service_name(i: usize) -> String {
    format!("svc-{i:04}")
}

/// A cloud with `nodes` running instances named like [`node_name`] and a pool big enough for
/// every Service.
pub fn fleet_cloud(nodes: usize) -> FakeCloud {
    let mut b = FakeCloud::builder().lb_pool_cidr("10.200.0.0/16");
    for i in 0..nodes {
        let name = node_name(i);
        b = b.instance(
            FakeInstance::new(name.clone())
                .provider_id(format!("fake://{name}"))
                .instance_type("fake.large")
                .zone(format!("zone-{}", i % 3), "region-1")
                .internal_ip(format!("10.0.{}.{}", i / 250, 1 + i % 250)),
        );
    }
    b.build().expect("valid fleet")
}

/// A Node as kubelet registers it under an external cloud provider. kubelet's hostname label is
/// the short host name (a label value has at most 63 characters), not the full node name.
pub fn uninitialized_node(name: &str) -> Node {
    let hostname: String = name
        .split('.')
        .next()
        .unwrap_or(name)
        .chars()
        .take(63)
        .collect();
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "kubernetes.io/hostname": hostname } },
        "spec": { "taints": [{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] }
    }))
    .expect("valid node")
}

pub fn lb_service(name: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": "default" },
        "spec": {
            "type": "LoadBalancer",
            "selector": { "app": name },
            "ports": [{ "name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP" }]
        }
    }))
    .expect("valid service")
}

/// Retries an API call through injected 500/429s until it succeeds; `Ok(None)` when the server
/// answered with one of `accept` (e.g. 409 on a create that an earlier, failed-looking attempt
/// already applied, 404 on a delete).
pub async fn retry<T, F, Fut>(accept: &[u16], mut call: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    for _ in 0..200 {
        match call().await {
            Ok(v) => return Some(v),
            Err(kube::Error::Api(s)) if accept.contains(&s.code) => return None,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    panic!("API call kept failing after 200 attempts");
}

pub async fn create_nodes(client: &kube::Client, names: impl IntoIterator<Item = String>) {
    let api: Api<Node> = Api::all(client.clone());
    for name in names {
        let node = uninitialized_node(&name);
        let pp = PostParams::default();
        retry(&[409], || api.create(&pp, &node)).await;
    }
}

pub async fn create_services(client: &kube::Client, names: impl IntoIterator<Item = String>) {
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    for name in names {
        let svc = lb_service(&name);
        let pp = PostParams::default();
        retry(&[409], || api.create(&pp, &svc)).await;
    }
}

pub async fn delete_service(client: &kube::Client, name: &str) {
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let dp = DeleteParams::default();
    retry(&[404], || api.delete(name, &dp)).await;
}

/// Runs the stock controllers in a manager over `client` with `cloud`; cancel the token to stop.
pub fn start_manager(
    client: kube::Client,
    cloud: Arc<dyn CloudProvider>,
    opts: CloudOptions,
    config: ManagerConfig,
) -> (CancellationToken, JoinHandle<Result<(), ManagerError>>) {
    let manager = Manager::new(config, client, CloudContext::new(cloud, opts))
        .with_initializers(cloud_initializers());
    let stop = CancellationToken::new();
    let task = tokio::spawn(manager.run(stop.clone()));
    (stop, task)
}

pub fn manager_config(name: &str) -> ManagerConfig {
    let mut config = ManagerConfig::new(name);
    config.cache_sync_timeout = Duration::from_secs(60);
    config.graceful_shutdown_timeout = Duration::from_secs(5);
    config
}

/// What the API server and the cloud hold at one moment, for convergence checks.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Node name → initialized (no uninitialized taint, providerID set).
    pub nodes: BTreeMap<String, bool>,
    /// Service name → (has ingress IP, has cleanup finalizer, being deleted).
    pub services: BTreeMap<String, (bool, bool, bool)>,
    /// `namespace/name` of the Service each cloud load balancer serves.
    pub lbs: BTreeSet<String>,
    /// Load balancers by name, to spot two for one Service.
    pub lb_count: usize,
}

impl Snapshot {
    /// `None` when a list failed (an injected fault); the caller just looks again.
    pub async fn take(client: &kube::Client, cloud: &FakeCloud) -> Option<Snapshot> {
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .ok()?;
        let services = Api::<Service>::namespaced(client.clone(), "default")
            .list(&ListParams::default())
            .await
            .ok()?;
        let lbs = cloud.load_balancers();
        Some(Snapshot {
            nodes: nodes
                .items
                .iter()
                .map(|n| {
                    let spec = n.spec.as_ref();
                    let tainted = spec
                        .and_then(|s| s.taints.as_ref())
                        .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED));
                    let has_id = spec.and_then(|s| s.provider_id.as_ref()).is_some();
                    (
                        n.metadata.name.clone().unwrap_or_default(),
                        !tainted && has_id,
                    )
                })
                .collect(),
            services: services
                .items
                .iter()
                // The API server's own `kubernetes` Service is not ours to check.
                .filter(|s| s.metadata.name.as_deref() != Some("kubernetes"))
                .map(|s| {
                    let ingress = s
                        .status
                        .as_ref()
                        .and_then(|st| st.load_balancer.as_ref())
                        .and_then(|lb| lb.ingress.as_ref())
                        .is_some_and(|i| i.iter().any(|i| i.ip.is_some()));
                    let finalizer =
                        s.metadata.finalizers.as_ref().is_some_and(|f| {
                            f.iter().any(|f| f == LOAD_BALANCER_CLEANUP_FINALIZER)
                        });
                    let deleting = s.metadata.deletion_timestamp.is_some();
                    (
                        s.metadata.name.clone().unwrap_or_default(),
                        (ingress, finalizer, deleting),
                    )
                })
                .collect(),
            lb_count: lbs.len(),
            lbs: lbs.into_iter().map(|lb| lb.service).collect(),
        })
    }

    /// Every expected node initialized, exactly the `live` Services exist, each with ingress and
    /// one load balancer, and no load balancer without a live Service.
    pub fn converged(&self, nodes: usize, live: &BTreeSet<String>) -> bool {
        let want_lbs: BTreeSet<String> = live.iter().map(|s| format!("default/{s}")).collect();
        self.nodes.len() == nodes
            && self.nodes.values().all(|ok| *ok)
            && self.services.keys().cloned().collect::<BTreeSet<_>>() == *live
            && self
                .services
                .values()
                .all(|(ingress, fin, del)| *ingress && *fin && !*del)
            && self.lbs == want_lbs
            && self.lb_count == live.len()
    }

    pub fn summary(&self) -> String {
        format!(
            "nodes {}/{} initialized, services {} ({} with ingress, {} deleting), {} load balancers",
            self.nodes.values().filter(|ok| **ok).count(),
            self.nodes.len(),
            self.services.len(),
            self.services.values().filter(|s| s.0).count(),
            self.services.values().filter(|s| s.2).count(),
            self.lb_count
        )
    }
}

/// Polls the API server and the cloud until [`Snapshot::converged`]; panics with the last
/// snapshot after `within`. (Convergence is a property of another system's state, so it is
/// observed, not awaited on a channel.)
pub async fn wait_converged(
    client: &kube::Client,
    cloud: &FakeCloud,
    nodes: usize,
    live: &BTreeSet<String>,
    within: Duration,
) {
    let deadline = tokio::time::Instant::now() + within;
    let mut last = None;
    loop {
        if let Some(s) = Snapshot::take(client, cloud).await {
            if s.converged(nodes, live) {
                return;
            }
            last = Some(s);
        }
        if tokio::time::Instant::now() > deadline {
            panic!(
                "not converged within {within:?}: {}",
                last.map(|s| s.summary()).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Logs to the test output when `RUST_LOG` is set (e.g. `RUST_LOG=cloud_controllers=debug`).
pub fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}
