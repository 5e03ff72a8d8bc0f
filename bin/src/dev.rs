//! `--dev`: everything a newcomer needs to watch the controllers work without a cluster — the
//! embedded API server, the fake cloud with three instances (adopting any Node added later: the
//! one place adoption is on), three uninitialized Nodes that match them, and one LoadBalancer
//! Service.

use std::sync::Arc;

use anyhow::Context;
use cloud_controllers::cloud::CloudProvider;
use fake_cloud::{FakeCloud, FakeInstance};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::json;
use tracing::info;

use crate::cli::Cli;

/// The running `--dev` environment; dropping it stops the embedded API server.
pub struct DevEnv {
    env: TestEnv,
    cloud: FakeCloud,
}

impl DevEnv {
    /// Where the embedded API server is, for the manager's own client stack.
    pub fn config(&self) -> kube::Config {
        self.env.config()
    }

    /// The fake cloud the controllers talk to.
    pub fn cloud(&self) -> Arc<dyn CloudProvider> {
        Arc::new(self.cloud.clone())
    }
}

const NODES: [(&str, &str, &str, &str); 3] = [
    ("dev-node-1", "zone-a", "10.0.0.11", "10.244.1.0/24"),
    ("dev-node-2", "zone-b", "10.0.0.12", "10.244.2.0/24"),
    ("dev-node-3", "zone-c", "10.0.0.13", "10.244.3.0/24"),
];

/// Starts the API server, writes its kubeconfig, seeds the cloud and the cluster.
pub async fn start(cli: &Cli) -> anyhow::Result<DevEnv> {
    let env = TestEnv::builder()
        .port(cli.dev.dev_api_port)
        .start()
        .await
        .context("starting the embedded API server")?;
    let kubeconfig = &cli.dev.dev_kubeconfig;
    env.write_kubeconfig(kubeconfig)
        .with_context(|| format!("writing {}", kubeconfig.display()))?;

    // Adopting unknown Nodes (as running instances) is for `--dev` only: Nodes a newcomer adds
    // with kubectl get initialized too. Everywhere else the fake touches only its instances.
    let mut cloud = FakeCloud::builder()
        .lb_pool_cidr("203.0.113.0/28")
        .adopt_unknown_nodes(true);
    for (i, (name, zone, ip, _)) in NODES.iter().enumerate() {
        cloud = cloud.instance(
            FakeInstance::new(*name)
                .provider_id(format!("fake://{name}"))
                .instance_type("dev.large")
                .zone(*zone, "dev-region")
                .internal_ip(*ip)
                .external_ip(format!("198.51.100.{}", 11 + i)),
        );
    }
    let cloud = cloud.build().context("building the fake cloud")?;

    let client = env.client();
    let nodes: Api<Node> = Api::all(client.clone());
    for (name, _, _, pod_cidr) in NODES {
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
            "spec": {
                "podCIDR": pod_cidr,
                "podCIDRs": [pod_cidr],
                "taints": [{
                    "key": "node.cloudprovider.kubernetes.io/uninitialized",
                    "value": "true",
                    "effect": "NoSchedule"
                }]
            }
        }))?;
        nodes
            .create(&PostParams::default(), &node)
            .await
            .with_context(|| format!("creating Node {name}"))?;
        let ready = json!({ "status": { "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kubelet is posting ready status"
        }]}});
        nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&ready))
            .await
            .with_context(|| format!("marking Node {name} Ready"))?;
    }
    let services: Api<Service> = Api::namespaced(client, "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": "hello" },
        "spec": {
            "type": "LoadBalancer",
            "selector": { "app": "hello" },
            "ports": [{ "name": "http", "port": 80, "targetPort": 8080 }]
        }
    }))?;
    services
        .create(&PostParams::default(), &svc)
        .await
        .context("creating Service default/hello")?;

    info!(api = %env.url(), kubeconfig = %kubeconfig.display(), "--dev environment is up");
    println!(
        "\nThe embedded API server is at {}. To look at what the controllers did, run:\n\n    kubectl --kubeconfig {} get nodes,svc -o wide\n",
        env.url(),
        kubeconfig.display()
    );
    Ok(DevEnv { env, cloud })
}
