//! How to test a provider with the real controllers, in-process, against kube-testenv (the
//! pattern `docs/writing-a-provider.md` shows): the provider is registered and picked exactly as
//! in production (`.provider(NAME, factory)`, `--cloud-provider`, `--cloud-config`), and the stock
//! controllers initialize a Node from it and give a LoadBalancer Service a VIP. The manager runs
//! in the test's runtime under `controller_manager::testing::ManagerTask`, so a start-up error
//! fails the first wait at once, with the error.

use cloud_controllers::app::{CloudControllerManager, CloudManagerOptions};
use controller_manager::testing::{ManagerTask, TestEnv};
use embedding_examples::static_inventory::{self, StaticInventory};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, PostParams};
use serde_json::json;

const INVENTORY: &str = r#"
region: dc-1
machines:
  - {name: n1, id: SN-1, type: r650, zone: rack-1, addresses: [{type: InternalIP, address: 10.0.0.1}]}
loadBalancerVIPs: [192.0.2.10]
"#;

#[tokio::test]
async fn controllers_initialize_nodes_and_load_balancers_from_the_provider() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let taint = json!({"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"});
    let node = json!({"metadata": {"name": "n1"}, "spec": {"taints": [taint]}});
    let node: Node = serde_json::from_value(node).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let svc = json!({"metadata": {"name": "web"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}});
    let svc: Service = serde_json::from_value(svc).unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();

    let config = std::env::temp_dir().join(format!("provider-e2e-{}.yaml", std::process::id()));
    std::fs::write(&config, INVENTORY).unwrap();
    let options = CloudManagerOptions::from_args([
        "--cloud-provider=static-inventory",
        &format!("--cloud-config={}", config.display()),
        "--leader-elect=false",
        "--secure-port=0",
    ])
    .unwrap();
    let mut manager = ManagerTask::spawn(|stop| {
        CloudControllerManager::new("provider-test", options)
            .provider(static_inventory::NAME, StaticInventory::factory)
            .with_client_config(env.config())
            .without_telemetry()
            .run(stop)
    });

    let initialized = |n: Option<&Node>| {
        n.and_then(|n| n.spec.as_ref()?.provider_id.clone())
            .as_deref()
            == Some("static-inventory://SN-1")
    };
    let node = manager.wait_for(&nodes, "n1", "n1 initialized", initialized);
    let node = node.await.unwrap().unwrap();
    let labels = node.metadata.labels.unwrap();
    assert_eq!(labels["topology.kubernetes.io/zone"], "rack-1");
    assert_eq!(labels["node.kubernetes.io/instance-type"], "r650");

    let has_vip = |s: Option<&Service>| {
        let ingress = s.and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.clone());
        ingress.is_some_and(|i| i.iter().any(|i| i.ip.as_deref() == Some("192.0.2.10")))
    };
    manager
        .wait_for(&services, "web", "web gets a VIP", has_vip)
        .await
        .unwrap();

    manager.stop().await.unwrap();
    let _ = std::fs::remove_file(&config);
}
