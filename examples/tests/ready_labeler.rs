//! The minimal `ready-labeler` example against kube-testenv, started as a process with leader
//! election on: it labels Nodes after their Ready condition and follows changes.

use controller_manager::testing::{ManagerProcess, Requests, TestEnv};
use embedding_examples::ready_labeler::LABEL;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams, ResourceExt};
use serde_json::json;

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

async fn wait_labels(
    labeler: &mut ManagerProcess,
    nodes: &Api<Node>,
    want: [(&str, &'static str); 2],
) {
    for (name, value) in want {
        let what = format!("{name} labelled {value}");
        labeler
            .wait_for(nodes, name, &what, labelled(value))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn labels_nodes_after_their_ready_condition() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    for name in ["a", "b"] {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    set_ready(&nodes, "a", "True").await;

    let exe = env!("CARGO_BIN_EXE_ready-labeler");
    let mut labeler = ManagerProcess::start(exe, &env, ["--secure-port=0"]).unwrap();
    wait_labels(&mut labeler, &nodes, [("a", "true"), ("b", "false")]).await;

    set_ready(&nodes, "a", "False").await;
    set_ready(&nodes, "b", "True").await;
    wait_labels(&mut labeler, &nodes, [("a", "false"), ("b", "true")]).await;
    labeler.stop().await.unwrap();

    let leases = Requests::of(&env).resource("leases").count();
    assert!(leases > 0, "leader election is on by default");
}
