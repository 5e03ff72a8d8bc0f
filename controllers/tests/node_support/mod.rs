//! Shared set-up for the node controller integration tests: an embedded API server, Nodes created
//! through a real `kube::Client`, and a cache the tests refresh explicitly (standing in for the
//! shared informer, so each test controls exactly what the controller sees).

#![allow(dead_code)] // each test binary uses a different subset

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Taint};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::json;

use cloud_controllers::node::{MemoryNodeLister, UNINITIALIZED_TAINT_KEY};
use fake_cloud::{Facets, FakeCloud, FakeInstance};

pub struct Cluster {
    pub env: TestEnv,
    pub api: Api<Node>,
    pub lister: Arc<MemoryNodeLister>,
}

impl Cluster {
    pub async fn start() -> Cluster {
        let env = TestEnv::start().await.expect("testenv starts");
        let api = Api::all(env.client());
        Cluster {
            env,
            api,
            lister: Arc::new(MemoryNodeLister::default()),
        }
    }

    /// Copies every Node from the API server into the cache, as a synced informer would.
    pub async fn refresh(&self) {
        let nodes = self
            .api
            .list(&ListParams::default())
            .await
            .expect("list nodes");
        self.lister.replace(nodes.items);
    }

    pub async fn create(&self, node: Node) -> Node {
        let created = self
            .api
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        if let Some(status) = node.status {
            let patch = json!({ "status": status });
            self.api
                .patch_status(
                    created.metadata.name.as_deref().unwrap(),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
                .expect("patch node status")
        } else {
            created
        }
    }

    pub async fn get(&self, name: &str) -> Node {
        self.api.get(name).await.expect("get node")
    }

    pub async fn get_opt(&self, name: &str) -> Option<Node> {
        self.api.get_opt(name).await.expect("get node")
    }

    /// (verb, subresource) of the Node writes served since the last `clear_requests`.
    pub fn node_writes(&self) -> Vec<String> {
        self.env
            .requests()
            .into_iter()
            .filter(|r| {
                r.resource == "nodes" && !matches!(r.verb.as_str(), "get" | "list" | "watch")
            })
            .map(|r| match r.subresource {
                Some(sub) => format!("{} {}", r.verb, sub),
                None => r.verb,
            })
            .collect()
    }
}

/// A fake cloud with every facet, holding `instances`.
pub fn fake(instances: impl IntoIterator<Item = FakeInstance>) -> FakeCloud {
    fake_with(Facets::all(), instances)
}

/// A fake cloud on the legacy `Instances` facet (no `InstancesV2`), holding `instances`.
pub fn legacy_fake(instances: impl IntoIterator<Item = FakeInstance>) -> FakeCloud {
    let facets = Facets {
        instances_v2: false,
        ..Facets::all()
    };
    fake_with(facets, instances)
}

/// A fake cloud with `facets`, holding `instances`.
pub fn fake_with(facets: Facets, instances: impl IntoIterator<Item = FakeInstance>) -> FakeCloud {
    let builder = FakeCloud::builder().facets(facets);
    let builder = instances.into_iter().fold(builder, |b, i| b.instance(i));
    builder.build().expect("valid fake cloud")
}

pub fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        effect: effect.into(),
        ..Default::default()
    }
}

pub fn addr(type_: &str, address: &str) -> NodeAddress {
    NodeAddress {
        type_: type_.into(),
        address: address.into(),
    }
}

/// A Node as kubelet with `--cloud-provider=external` registers it.
pub fn kubelet_node(name: &str) -> Node {
    let mut node = Node::default();
    node.metadata.name = Some(name.into());
    node.spec = Some(NodeSpec {
        taints: Some(vec![
            Taint {
                key: UNINITIALIZED_TAINT_KEY.into(),
                value: Some("true".into()),
                effect: "NoSchedule".into(),
                ..Default::default()
            },
            taint("example.com/keep", "NoExecute"),
        ]),
        ..Default::default()
    });
    node.status = Some(NodeStatus {
        addresses: Some(vec![addr("Hostname", "kubelet-host")]),
        ..Default::default()
    });
    node
}

/// A Node that is already initialized.
pub fn initialized_node(name: &str, provider_id: &str) -> Node {
    let mut node = Node::default();
    node.metadata.name = Some(name.into());
    node.spec = Some(NodeSpec {
        provider_id: Some(provider_id.into()),
        ..Default::default()
    });
    node
}

pub fn with_ready(mut node: Node, status: &str) -> Node {
    let st = node.status.get_or_insert_with(Default::default);
    st.conditions = Some(vec![NodeCondition {
        type_: "Ready".into(),
        status: status.into(),
        ..Default::default()
    }]);
    node
}

pub fn with_annotation(mut node: Node, key: &str, value: &str) -> Node {
    node.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), value.into());
    node
}

pub fn with_label(mut node: Node, key: &str, value: &str) -> Node {
    node.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), value.into());
    node
}

/// The Node's taints, without the `node.kubernetes.io/not-ready` taint the API server's
/// TaintNodesByCondition admission adds to every new Node (it is not ours to manage).
pub fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key != "node.kubernetes.io/not-ready")
        .collect()
}

pub fn labels(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

pub fn addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
}

pub fn provider_id(node: &Node) -> Option<String> {
    node.spec.as_ref().and_then(|s| s.provider_id.clone())
}
