//! A minimal controller on the framework: labels every Node `example.com/ready=true|false` after
//! its Ready condition, so label selectors (`kubectl get nodes -l example.com/ready=false`, a
//! DaemonSet's nodeSelector) can see readiness, which they cannot select on directly.

use std::sync::Arc;

use controller_manager::builder::ControllerBuilder;
use controller_manager::controller::Action;
use controller_manager::informer::Event;
use controller_manager::manager::{InitContext, InitError, InitOutcome, Initializer};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, ResourceExt};
use serde_json::json;

/// The label this controller owns.
pub const LABEL: &str = "example.com/ready";
/// The name `--controllers` and the Lease know it by.
pub const NAME: &str = "ready-labeler";

/// The initializer map entry; needs nothing from the manager's context.
pub fn initializer<C: Send + Sync + 'static>() -> Initializer<C> {
    Initializer::new(NAME, init)
}

async fn init<C: Send + Sync + 'static>(ctx: InitContext<C>) -> Result<InitOutcome, InitError> {
    let api = Api::<Node>::all(ctx.client.clone());
    Ok(ControllerBuilder::<Node>::new(&ctx)
        .with_predicate(|e: &Event<Node>| label_outdated(e.object()))
        .start_fn(move |node| reconcile(api.clone(), node)))
}

async fn reconcile(api: Api<Node>, node: Arc<Node>) -> kube::Result<Action> {
    let patch = json!({"metadata": {"labels": {LABEL: desired(&node)}}});
    api.patch(
        &node.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(Action::Done)
}

fn label_outdated(node: &Node) -> bool {
    node.labels().get(LABEL).map(String::as_str) != Some(desired(node))
}

fn desired(node: &Node) -> &'static str {
    let conditions = node
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten());
    let ready = conditions
        .filter(|c| c.type_ == "Ready")
        .any(|c| c.status == "True");
    if ready { "true" } else { "false" }
}
