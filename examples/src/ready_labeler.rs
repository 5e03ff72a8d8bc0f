//! A minimal controller on the framework: labels every Node `example.com/ready=true|false` after
//! its Ready condition, so label selectors (`kubectl get nodes -l example.com/ready=false`, a
//! DaemonSet's nodeSelector) can see readiness, which they cannot select on directly.

use std::sync::Arc;
use std::time::Duration;

use controller_manager::controller::{Action, Controller, Request, layers};
use controller_manager::informer::{Event, Store};
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

async fn init<C>(ctx: InitContext<C>) -> Result<InitOutcome, InitError> {
    let informer = ctx.factory.informer::<Node>();
    let queue = ctx.queue::<String>(NAME, ctx.default_rate_limiter());
    let q = queue.clone();
    informer
        .add_handler(move |e: &Event<Node>| {
            if let Event::Added(n) | Event::Updated { new: n, .. } = e
                && n.labels().get(LABEL).map(String::as_str) != Some(desired(n))
            {
                q.add(n.name_any());
            }
        })
        .detach();
    let (nodes, api) = (informer.store(), Api::<Node>::all(ctx.client.clone()));
    let service = layers::standard(NAME, &ctx.controller_metrics(), Duration::from_secs(30))
        .service_fn(move |req: Request<String>| reconcile(nodes.clone(), api.clone(), req.key));
    let stop = ctx.shutdown.clone();
    Ok(InitOutcome::Started(Box::pin(
        Controller::new(NAME, queue, service).run(stop),
    )))
}

async fn reconcile(nodes: Store<Node>, api: Api<Node>, name: String) -> kube::Result<Action> {
    let Some(node) = nodes.get_by_name(&name) else {
        return Ok(Action::Done); // deleted since the event: nothing to label
    };
    let patch = json!({"metadata": {"labels": {LABEL: desired(&node)}}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(Action::Done)
}

fn desired(node: &Arc<Node>) -> &'static str {
    let conditions = node
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten());
    let ready = conditions
        .filter(|c| c.type_ == "Ready")
        .any(|c| c.status == "True");
    if ready { "true" } else { "false" }
}
