//! `metal-ccm --dev`: everything running without a cluster, as the stock binary's `--dev`, on
//! the embedded kube-testenv: the `AddressPool` CRD, two pools, the inventory's two Nodes (not
//! yet initialized), and the two webhook configurations of `docs/deploy/`, which metal-ccm
//! itself points at this process and gives its CA (self-managed certificates, URL mode). So
//! `kubectl apply` of an overlapping pool is refused there, as on a cluster.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use cloud_controllers::app::CloudManagerOptions;
use controller_manager::options::EndHelpHeading;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kube_testenv::TestEnv;
use serde_json::{Value, json};

use crate::address_pool::{self, AddressPool};

const INVENTORY: &str = include_str!("../inventory.example.yaml");
const POOLS: &str = include_str!("../addresspools.example.yaml");
const WEBHOOKS: &str = include_str!("../../docs/deploy/addresspool-webhooks.yaml");
const SECRET: &str = "kube-system/metal-ccm-webhook-certs";
const MANAGED: &str = "MutatingWebhookConfiguration/metal-ccm-addresspools,ValidatingWebhookConfiguration/metal-ccm-addresspools,CustomResourceDefinition/addresspools.metal.example.com";

/// No-cluster mode for newcomers and demos.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Development flags", end_help_heading = true)]
pub struct DevOptions {
    /// Run against an embedded API server with the AddressPool CRD, its webhooks, two pools and the inventory's Nodes.
    #[arg(long)]
    pub dev: bool,
    /// Where `--dev` writes the kubeconfig for kubectl.
    #[arg(long, default_value = "/tmp/metal-ccm-dev.kubeconfig")]
    pub dev_kubeconfig: PathBuf,
    /// Port of the embedded API server in `--dev` (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    pub dev_api_port: u16,
}

impl DevOptions {
    /// The flags `--dev` would have to ignore (it runs on its own API server, inventory and
    /// certificates), each a mistake to report rather than drop.
    pub fn conflicts(&self, ccm: &CloudManagerOptions) -> Vec<String> {
        if !self.dev {
            return Vec::new();
        }
        let named = [
            ("--kubeconfig", ccm.generic.client.kubeconfig.is_some()),
            ("--master", ccm.generic.client.master.is_some()),
            ("--cloud-config", ccm.cloud.cloud_config.is_some()),
            (
                "--webhook-self-managed-certs",
                ccm.webhooks.webhook_self_managed_certs.is_some(),
            ),
            ("--webhook-url", ccm.webhooks.webhook_url.is_some()),
            ("--webhook-service", ccm.webhooks.webhook_service.is_some()),
        ];
        let mut errors: Vec<String> = named
            .into_iter()
            .filter(|(_, given)| *given)
            .map(|(flag, _)| {
                format!(
                    "{flag} cannot be used with --dev, which runs against its own embedded API server, inventory and webhook certificates; drop one of them"
                )
            })
            .collect();
        if ccm.webhooks.webhook_secure_port == 0 {
            // The configurations --dev installs fail closed: with no webhook server every
            // AddressPool write would be refused.
            errors.push("--webhook-secure-port=0 cannot be used with --dev, which serves the AddressPool webhooks its configurations call; give a port or drop it".to_string());
        }
        errors
    }
}

/// The running `--dev` environment; dropping it stops the embedded API server.
pub struct DevEnv {
    env: TestEnv,
    _inventory: TempFile,
}

impl DevEnv {
    /// Where the embedded API server is, for the manager's own client stack.
    pub fn config(&self) -> kube::Config {
        self.env.config()
    }
}

/// A file removed on drop.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Starts the API server and seeds it, and sets the flags `--dev` implies on `ccm` (the
/// provider, its inventory, the controllers and the webhooks with self-managed certificates in
/// URL mode, on loopback); explicit flags for controllers and ports still win.
pub async fn start(dev: &DevOptions, ccm: &mut CloudManagerOptions) -> anyhow::Result<DevEnv> {
    let env = TestEnv::builder()
        .port(dev.dev_api_port)
        .start()
        .await
        .context("starting the embedded API server")?;
    env.write_kubeconfig(&dev.dev_kubeconfig)
        .with_context(|| format!("writing {}", dev.dev_kubeconfig.display()))?;
    let inventory = std::env::temp_dir().join(format!("metal-ccm-dev-{}.yaml", std::process::id()));
    std::fs::write(&inventory, INVENTORY)
        .with_context(|| format!("writing {}", inventory.display()))?;
    let inventory = TempFile(inventory);
    seed(&env.client()).await?;
    dev_flags(ccm, &inventory.0);
    tracing::info!(api = %env.url(), kubeconfig = %dev.dev_kubeconfig.display(), "--dev environment is up");
    println!(
        "\nThe embedded API server is at {}. Try:\n\n    kubectl --kubeconfig {} get addresspools,nodes\n",
        env.url(),
        dev.dev_kubeconfig.display()
    );
    Ok(DevEnv {
        env,
        _inventory: inventory,
    })
}

fn dev_flags(ccm: &mut CloudManagerOptions, inventory: &std::path::Path) {
    ccm.cloud.cloud_provider = crate::static_inventory::NAME.to_string();
    ccm.cloud.cloud_config = Some(inventory.to_path_buf());
    let generic = &mut ccm.generic;
    if generic.controllers == ["*"] {
        generic.controllers = ["*", "-route", "node-inventory", "address-pool"]
            .map(String::from)
            .to_vec();
    }
    let gates = &mut generic.feature_gates;
    gates.push(format!(
        "{}=true",
        controller_manager::options::feature_gates::CLOUD_CONTROLLER_MANAGER_WEBHOOK
    ));
    let hooks = &mut ccm.webhooks;
    if hooks.webhooks.is_empty() {
        hooks.webhooks = vec!["*".to_string()];
    }
    hooks.webhook_bind_address = std::net::Ipv4Addr::LOCALHOST.into();
    hooks.webhook_self_managed_certs = Some(SECRET.to_string());
    hooks.webhook_cert_hosts = vec!["127.0.0.1".to_string()];
    hooks.webhook_managed_configurations = MANAGED.split(',').map(String::from).collect();
    hooks.webhook_url = Some(format!("https://127.0.0.1:{}", hooks.webhook_secure_port));
}

/// The CRD (awaited until Established), the pools and Nodes, then the webhook configurations,
/// last so the pools are written before a webhook is asked about them.
async fn seed(client: &kube::Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = address_pool::crd().context("merging the AddressPool CRD's versions")?;
    crds.create(&PostParams::default(), &crd)
        .await
        .context("creating the AddressPool CRD")?;
    let name = "addresspools.metal.example.com";
    let established = kube::runtime::wait::conditions::is_crd_established();
    let waited = kube::runtime::wait::await_condition(crds, name, established);
    tokio::time::timeout(Duration::from_secs(30), waited)
        .await
        .context("waiting for the AddressPool CRD to be Established")??;

    let pools: Api<AddressPool> = Api::all(client.clone());
    for doc in serde_saphyr::from_multiple::<Value>(POOLS).context("reading the example pools")? {
        let pool: AddressPool = serde_json::from_value(doc)?;
        pools
            .create(&PostParams::default(), &pool)
            .await
            .context("creating an example AddressPool")?;
    }
    let inventory: Value = serde_saphyr::from_str(INVENTORY).context("reading the inventory")?;
    let nodes: Api<Node> = Api::all(client.clone());
    for machine in inventory["machines"].as_array().into_iter().flatten() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": machine["name"]},
            "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]},
        }))?;
        nodes
            .create(&PostParams::default(), &node)
            .await
            .context("creating a Node")?;
    }
    for doc in serde_saphyr::from_multiple::<Value>(WEBHOOKS).context("reading the webhooks")? {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        let plural = format!("{}s", kind.to_lowercase());
        let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", &kind);
        let api: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &ApiResource::from_gvk_with_plural(&gvk, &plural),
        );
        let object: DynamicObject = serde_json::from_value(doc)?;
        api.create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating the {kind}"))?;
    }
    Ok(())
}
