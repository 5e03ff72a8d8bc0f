//! The minimal `ready-labeler` example against kube-testenv, started as a process with leader
//! election on: it labels Nodes after their Ready condition and follows changes.

mod support;

use embedding_examples::ready_labeler::LABEL;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams, ResourceExt};
use kube_testenv::TestEnv;
use serde_json::json;
use support::{Example, Scratch};

fn labelled(value: &'static str) -> impl Fn(Option<&Node>) -> bool {
    move |n| n.and_then(|n| n.labels().get(LABEL).cloned()).as_deref() == Some(value)
}

async fn set_ready(nodes: &Api<Node>, name: &str, status: &str) {
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": status}]}});
    let params = PatchParams::default();
    nodes
        .patch_status(name, &params, &Patch::Merge(&ready))
        .await
        .unwrap();
}

#[tokio::test]
async fn labels_nodes_after_their_ready_condition() {
    let env = TestEnv::start().await.unwrap();
    let scratch = Scratch::new("ready-labeler");
    let nodes: Api<Node> = Api::all(env.client());
    for name in ["a", "b"] {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    set_ready(&nodes, "a", "True").await;

    let labeler = Example::start(
        env!("CARGO_BIN_EXE_ready-labeler"),
        &env,
        &scratch,
        &["--secure-port=0"],
    );
    labeler
        .wait_for(&nodes, "a", "a labelled true", labelled("true"))
        .await;
    labeler
        .wait_for(&nodes, "b", "b labelled false", labelled("false"))
        .await;

    set_ready(&nodes, "a", "False").await;
    set_ready(&nodes, "b", "True").await;
    labeler
        .wait_for(&nodes, "a", "a relabelled false", labelled("false"))
        .await;
    labeler
        .wait_for(&nodes, "b", "b relabelled true", labelled("true"))
        .await;
    labeler.stop().await;

    let leases = env
        .requests()
        .into_iter()
        .filter(|r| r.resource == "leases")
        .count();
    assert!(leases > 0, "leader election is on by default");
}
