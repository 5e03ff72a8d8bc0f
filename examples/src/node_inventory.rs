//! `node-inventory`: keeps one ConfigMap listing every initialized Node with what the cloud said
//! about it (provider ID, instance type, zone, region, addresses), for site tooling (DHCP, asset
//! database, monitoring) that reads a ConfigMap but cannot watch Nodes.
//!
//! It reads the process's shared Node informer, the one the stock node controllers fill: no
//! second LIST or WATCH. Every relevant Node change enqueues the one ConfigMap key; the queue
//! dedups bursts, so a hundred Nodes initializing at once cost one write.
//! Off under `--controllers=*`: it writes an object the stock controllers never touch, so it must
//! be asked for by name (and granted `configmaps` get/create/update in its namespace).

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use controller_manager::controller::{Action, Controller, Request, layers};
use controller_manager::informer::{Event, Store};
use controller_manager::manager::{InitContext, InitError, InitOutcome, Initializer};
use controller_manager::options::EndHelpHeading;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::json;

/// The name `--controllers` knows it by.
pub const NAME: &str = "node-inventory";

const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// `NAMESPACE/NAME` of the ConfigMap, checked when the flags are parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigMapRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl FromStr for ConfigMapRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(ConfigMapRef {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                })
            }
            _ => Err(format!("{s:?} is not NAMESPACE/NAME")),
        }
    }
}

/// The controller's own flags, flattened into the distro's flag set.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Node-inventory flags", end_help_heading = true)]
pub struct NodeInventoryOptions {
    /// NAMESPACE/NAME of the ConfigMap the node-inventory controller keeps.
    #[arg(
        long,
        default_value = "kube-system/node-inventory",
        verbatim_doc_comment
    )]
    pub node_inventory_configmap: ConfigMapRef,
}

/// The initializer map entry; works with any manager context, since it needs no cloud.
pub fn initializer<C: Send + Sync + 'static>(options: NodeInventoryOptions) -> Initializer<C> {
    let target = options.node_inventory_configmap;
    Initializer::new(NAME, move |ctx| init(ctx, target.clone())).disabled_by_default()
}

async fn init<C>(ctx: InitContext<C>, target: ConfigMapRef) -> Result<InitOutcome, InitError> {
    let informer = ctx.factory.informer::<Node>();
    let queue = ctx.queue::<String>(NAME, ctx.default_rate_limiter());
    let (q, key) = (queue.clone(), target.name.clone());
    informer
        .add_handler(move |event: &Event<Node>| {
            let changed = match event {
                Event::Updated { old, new } => entry(old) != entry(new),
                Event::Added(n) | Event::Deleted(n) => entry(n).is_some(),
            };
            if changed {
                q.add(key.clone());
            }
        })
        .detach();
    // Write the ConfigMap once even when no Node is initialized yet.
    queue.add(target.name.clone());

    let nodes = informer.store();
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &target.namespace);
    let service = layers::standard(NAME, &ctx.controller_metrics(), Duration::from_secs(60))
        .service_fn(move |req: Request<String>| reconcile(nodes.clone(), api.clone(), req.key));
    let controller = Controller::new(NAME, queue, service);
    let stop = ctx.shutdown.clone();
    Ok(InitOutcome::Started(Box::pin(controller.run(stop))))
}

/// Makes the ConfigMap's data equal to the inventory of the cached Nodes.
async fn reconcile(
    nodes: Store<Node>,
    api: Api<ConfigMap>,
    name: String,
) -> Result<Action, kube::Error> {
    let data: BTreeMap<String, String> = nodes.list().iter().filter_map(entry).collect();
    match api.get_opt(&name).await? {
        Some(cm) if cm.data.as_ref() == Some(&data) => {}
        Some(mut cm) => {
            cm.data = Some(data);
            // Carries the resourceVersion read above: a concurrent writer makes this a conflict,
            // retried with backoff, instead of a lost update.
            api.replace(&name, &PostParams::default(), &cm).await?;
        }
        None => {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name),
                    ..Default::default()
                },
                data: Some(data),
                ..Default::default()
            };
            api.create(&PostParams::default(), &cm).await?;
        }
    }
    Ok(Action::Done)
}

/// The inventory line of an initialized Node (`None` while the cloud has not initialized it).
fn entry(node: &Arc<Node>) -> Option<(String, String)> {
    let spec = node.spec.as_ref()?;
    let provider_id = spec.provider_id.as_deref().filter(|p| !p.is_empty())?;
    let tainted = spec
        .taints
        .iter()
        .flatten()
        .any(|t| t.key == UNINITIALIZED_TAINT);
    if tainted {
        return None;
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
    let addresses: Vec<String> = node
        .status
        .iter()
        .flat_map(|s| s.addresses.iter().flatten())
        .map(|a| format!("{}={}", a.type_, a.address))
        .collect();
    let line = json!({
        "providerID": provider_id,
        "instanceType": label("node.kubernetes.io/instance-type"),
        "zone": label("topology.kubernetes.io/zone"),
        "region": label("topology.kubernetes.io/region"),
        "addresses": addresses,
    });
    Some((node.metadata.name.clone()?, line.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configmap_ref_needs_namespace_and_name() {
        let r: ConfigMapRef = "ops/nodes".parse().unwrap();
        assert_eq!((r.namespace.as_str(), r.name.as_str()), ("ops", "nodes"));
        for bad in ["nodes", "/nodes", "ops/", "a/b/c"] {
            assert!(bad.parse::<ConfigMapRef>().is_err(), "{bad}");
        }
    }

    #[test]
    fn runs_only_when_named() {
        use controller_manager::manager::{ControllerSelection, Initializers};
        let options = NodeInventoryOptions {
            node_inventory_configmap: "ops/nodes".parse().unwrap(),
        };
        let known = Initializers::<()>::new().with(initializer(options)).known();
        let select = |list: &[&str]| {
            let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            ControllerSelection::parse(&list, &known)
                .unwrap()
                .is_enabled(NAME)
        };
        assert!(!select(&["*"]));
        assert!(select(&["*", NAME]));
    }

    #[test]
    fn only_initialized_nodes_have_an_entry() {
        let node =
            |spec: serde_json::Value| {
                Arc::new(serde_json::from_value::<Node>(json!({
                "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "rack-1"}},
                "spec": spec,
                "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]},
            }))
            .unwrap())
            };
        assert_eq!(entry(&node(json!({}))), None);
        let taint = json!([{"key": UNINITIALIZED_TAINT, "effect": "NoSchedule", "value": "true"}]);
        assert_eq!(
            entry(&node(json!({"providerID": "x://1", "taints": taint}))),
            None
        );
        let (name, line) = entry(&node(json!({"providerID": "x://1"}))).unwrap();
        assert_eq!(name, "n1");
        let line: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(line["zone"], "rack-1");
        assert_eq!(line["addresses"], json!(["InternalIP=10.0.0.1"]));
    }
}
