//! Each stock controller talks to the API server with its own client, as upstream: the request
//! log of kube-testenv shows each controller's writes under its own user agent
//! (`<binary>/<client name>`), the shared informers under `<binary>/shared-informers`, and the
//! provider's `initialize` gets a client builder that does the same for its own controllers.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use cloud_controllers::app::{AppError, CloudControllerManager, CloudManagerOptions};
use cloud_controllers::cloud::CloudProvider;
use fake_cloud::FakeCloud;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, PostParams};
use kube::runtime::wait::await_condition;
use kube_testenv::{RequestRecord, TestEnv};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const NAME: &str = "ccm-test";
const WAIT: Duration = Duration::from_secs(60);

const CLOUD: &str = r#"
facets: {loadBalancer: true, instancesV2: true, instances: false, zones: false, routes: true, clusters: false}
instances:
  - {name: node-1, zone: zone-a, region: r, addresses: [{type: InternalIP, address: 10.0.0.1}]}
loadBalancerPool: {cidr: 203.0.113.0/29}
"#;

/// Runs the manager on `cloud` against `env` until the token is cancelled.
fn start(
    env: &TestEnv,
    options: CloudManagerOptions,
    cloud: Arc<dyn CloudProvider>,
) -> (CancellationToken, JoinHandle<Result<(), AppError>>) {
    let stop = CancellationToken::new();
    let manager = CloudControllerManager::new(NAME, options).with_cloud(cloud);
    let manager = manager.with_client_config(env.config()).without_telemetry();
    (stop.clone(), tokio::spawn(manager.run(stop)))
}

/// A cluster with node-1 and Service web, and the request log cleared.
async fn seeded() -> TestEnv {
    let env = TestEnv::start().await.unwrap();
    let node = json!({
        "metadata": {"name": "node-1"},
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"], "taints": [
            {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}
        ]}
    });
    let node: Node = serde_json::from_value(node).unwrap();
    Api::<Node>::all(env.client())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    let svc = json!({"metadata": {"name": "web"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}});
    let svc: Service = serde_json::from_value(svc).unwrap();
    Api::<Service>::namespaced(env.client(), "default")
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
    env.clear_requests();
    env
}

/// Runs the stock controllers until the Node is initialized, its route reported and the
/// Service has an address, then stops them.
async fn converge(env: &TestEnv, extra_args: &[&str]) {
    let mut args = vec![
        "--cloud-provider=fake",
        "--leader-elect=false",
        "--secure-port=0",
        "--cluster-cidr=10.244.0.0/16",
    ];
    args.extend_from_slice(extra_args);
    let options = CloudManagerOptions::from_args(args).unwrap();
    let cloud = FakeCloud::from_config(CLOUD.as_bytes()).unwrap();
    let (stop, task) = start(env, options, Arc::new(cloud));

    let nodes: Api<Node> = Api::all(env.client());
    let routed = |n: Option<&Node>| {
        let Some(n) = n else { return false };
        let initialized = n
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_ref())
            .is_some();
        let route = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == "NetworkUnavailable" && c.reason.as_deref() == Some("RouteCreated")
                })
            });
        initialized && route
    };
    let node = tokio::time::timeout(WAIT, await_condition(nodes, "node-1", routed)).await;
    assert!(matches!(node, Ok(Ok(Some(_)))), "node: {node:?}");
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let has_ip = |s: Option<&Service>| {
        s.and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.clone())
            .is_some_and(|i| !i.is_empty())
    };
    let svc = tokio::time::timeout(WAIT, await_condition(services, "web", has_ip)).await;
    assert!(matches!(svc, Ok(Ok(Some(_)))), "service: {svc:?}");
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// The successful requests of `verb` on `resource` (`resource/subresource` for a subresource).
fn requests_to<'a>(
    log: &'a [RequestRecord],
    verb: &'a str,
    resource: &'a str,
) -> impl Iterator<Item = &'a RequestRecord> {
    log.iter().filter(move |r| {
        let res = match &r.subresource {
            Some(sub) => format!("{}/{sub}", r.resource),
            None => r.resource.clone(),
        };
        r.verb == verb && res == resource && r.status < 400
    })
}

/// (verb, resource/subresource) → user agents that made such a request.
fn agents_of(log: &[RequestRecord], verb: &str, resource: &str) -> BTreeSet<String> {
    let requests = requests_to(log, verb, resource);
    requests.filter_map(|r| r.user_agent.clone()).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn each_controller_writes_under_its_own_user_agent() {
    let env = seeded().await;
    converge(&env, &[]).await;
    let log = env.requests();

    // The informers list and watch as the process, under one agent.
    assert_eq!(
        agents_of(&log, "watch", "nodes"),
        set(&["ccm-test/shared-informers"])
    );
    assert_eq!(
        agents_of(&log, "watch", "services"),
        set(&["ccm-test/shared-informers"])
    );
    // cloud-node initializes with a JSON patch; node-route reports NetworkUnavailable;
    // service-lb writes the load-balancer status: each under its upstream client name.
    assert!(
        agents_of(&log, "patch", "nodes").contains("ccm-test/node-controller"),
        "{:?}",
        agents_of(&log, "patch", "nodes")
    );
    assert!(agents_of(&log, "update", "nodes").is_empty());
    assert!(
        agents_of(&log, "patch", "nodes/status").contains("ccm-test/route-controller"),
        "{:?}",
        agents_of(&log, "patch", "nodes/status")
    );
    assert_eq!(
        agents_of(&log, "patch", "services/status"),
        set(&["ccm-test/service-controller"])
    );
    // Each controller's events go out with its own client too.
    let event_agents = agents_of(&log, "create", "events");
    assert!(
        event_agents.contains("ccm-test/node-controller")
            && event_agents.contains("ccm-test/service-controller"),
        "{event_agents:?}"
    );
    // Nothing went out under the bare process agent: every request is attributed.
    let bare: Vec<_> = log
        .iter()
        .filter(|r| r.user_agent.as_deref() == Some(NAME))
        .map(|r| (&r.verb, &r.resource))
        .collect();
    assert!(bare.is_empty(), "requests under the bare agent: {bare:?}");
}

/// (verb, resource/subresource) → authenticated users that made such a request.
fn users_of(log: &[RequestRecord], verb: &str, resource: &str) -> BTreeSet<String> {
    requests_to(log, verb, resource)
        .map(|r| r.user.clone())
        .collect()
}

fn sa(name: &str) -> String {
    format!("system:serviceaccount:kube-system:{name}")
}

#[tokio::test]
async fn without_service_account_credentials_everything_is_one_identity() {
    let env = seeded().await;
    converge(&env, &[]).await;
    let users: BTreeSet<String> = env.requests().into_iter().map(|r| r.user).collect();
    assert_eq!(users.len(), 1, "{users:?}");
}

#[tokio::test]
async fn with_service_account_credentials_each_controller_is_its_service_account() {
    let env = seeded().await;
    converge(&env, &["--use-service-account-credentials"]).await;
    let log = env.requests();
    let root = log
        .iter()
        .find(|r| r.user_agent.as_deref() == Some("ccm-test/shared-informers"))
        .map(|r| r.user.clone())
        .unwrap();

    assert!(users_of(&log, "patch", "nodes").contains(&sa("node-controller")));
    assert!(
        agents_of(&log, "patch", "nodes")
            .contains("ccm-test/system:serviceaccount:kube-system:node-controller")
    );
    assert!(users_of(&log, "patch", "nodes/status").contains(&sa("route-controller")));
    assert_eq!(
        users_of(&log, "patch", "services/status"),
        [sa("service-controller")].into()
    );
    let event_users = users_of(&log, "create", "events");
    assert!(
        event_users.contains(&sa("node-controller"))
            && event_users.contains(&sa("service-controller")),
        "{event_users:?}"
    );
    // The informers and the token requests use the process's own identity.
    assert_eq!(users_of(&log, "watch", "nodes"), [root.clone()].into());
    assert_eq!(
        users_of(&log, "create", "serviceaccounts/token"),
        [root.clone()].into()
    );
    // Each ServiceAccount was created (they did not exist before).
    let accounts =
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(env.client(), "kube-system")
            .list(&Default::default())
            .await
            .unwrap();
    let names: BTreeSet<String> = accounts
        .items
        .iter()
        .filter_map(|a| a.metadata.name.clone())
        .collect();
    for name in ["node-controller", "route-controller", "service-controller"] {
        assert!(names.contains(name), "{names:?}");
    }
}

/// A provider with no facets whose `initialize` starts its own controller: it builds a client
/// under its own client name and reads a ConfigMap with it, as a provider's informer would.
struct ProviderWithItsOwnController;

#[async_trait::async_trait]
impl CloudProvider for ProviderWithItsOwnController {
    async fn initialize(
        &self,
        ctx: cloud_controllers::cloud::InitializeContext,
    ) -> Result<(), cloud_controllers::cloud::CloudError> {
        let client = ctx
            .clients
            .client("acme-controller")
            .await
            .map_err(|e| cloud_controllers::cloud::CloudError::other(e.to_string()))?;
        let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(client, "kube-system");
        api.get_opt("acme-config")
            .await
            .map_err(|e| cloud_controllers::cloud::CloudError::other(e.to_string()))?;
        Ok(())
    }
    fn provider_name(&self) -> &str {
        "acme"
    }
    fn has_cluster_id(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn a_providers_own_controllers_get_their_own_identity() {
    let env = TestEnv::start().await.unwrap();
    let options = CloudManagerOptions::from_args([
        "--cloud-provider=acme",
        "--leader-elect=false",
        "--secure-port=0",
        "--use-service-account-credentials",
    ])
    .unwrap();
    let (stop, task) = start(&env, options, Arc::new(ProviderWithItsOwnController));
    let read = || {
        env.requests()
            .into_iter()
            .find(|r| r.resource == "configmaps" && r.name.as_deref() == Some("acme-config"))
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    let request = loop {
        if let Some(r) = read() {
            break r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the provider never read its ConfigMap"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(request.user, sa("acme-controller"));
    assert_eq!(
        request.user_agent.as_deref(),
        Some("ccm-test/system:serviceaccount:kube-system:acme-controller")
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}
