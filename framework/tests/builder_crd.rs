//! The builder and the object helpers on a custom resource, against kube-testenv's CRDs: a
//! `generation_changed` controller is not woken by status-only writes (its own or anyone's) nor
//! by its finalizer going on, is woken by spec changes, keeps a `Ready` condition with the
//! observedGeneration it judged, and runs its cleanup before the object goes.

mod support;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use controller_manager::builder::ControllerBuilder;
use controller_manager::builder::predicates::generation_changed;
use controller_manager::controller::Action;
use controller_manager::manager::{InitContext, Initializer, Initializers, Manager, ManagerConfig};
use controller_manager::object::{
    Finalizer, finalizer, new_condition, patch_status, set_condition,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::NamespaceResourceScope;
use kube::{Resource, ResourceExt};
use kube_testenv::TestEnv;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::json;
use support::shut_down;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);
const FINALIZER: &str = "example.com/cleanup";

/// `widgets.example.com/v1`, written out by hand (the framework does not use kube's derive).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Widget {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    #[serde(default)]
    spec: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<WidgetStatus>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
struct WidgetStatus {
    #[serde(default)]
    conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

impl Resource for Widget {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;
    fn kind(_: &()) -> Cow<'_, str> {
        "Widget".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "example.com".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "widgets".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// What the controller did, in order: `apply <name> <generation>` / `cleanup <name>`.
#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl Log {
    fn has(&self, line: &str) -> usize {
        self.0.lock().iter().filter(|l| *l == line).count()
    }
}

async fn reconcile(
    api: Api<Widget>,
    log: Arc<Log>,
    widget: Arc<Widget>,
) -> Result<Action, controller_manager::object::FinalizerError> {
    let writer = api.clone();
    finalizer(&api, FINALIZER, widget, |event| async move {
        match event {
            Finalizer::Apply(w) => {
                let generation = w.metadata.generation;
                log.0.lock().push(format!(
                    "apply {} {}",
                    w.name_any(),
                    generation.unwrap_or(0)
                ));
                let mut status = w.status.clone().unwrap_or_default();
                let ready = new_condition("Ready", true, "Reconciled", "spec applied", generation);
                set_condition(&mut status.conditions, ready);
                patch_status(&writer, &w, &status).await?;
            }
            Finalizer::Cleanup(w) => log.0.lock().push(format!("cleanup {}", w.name_any())),
        }
        Ok::<_, kube::Error>(Action::Done)
    })
    .await
}

fn widgets_controller() -> Initializer<Arc<Log>> {
    Initializer::new("widgets", |ctx: InitContext<Arc<Log>>| async move {
        let api = Api::<Widget>::namespaced(ctx.client.clone(), "default");
        let log: Arc<Log> = Arc::clone(&ctx.extra);
        Ok(ControllerBuilder::<Widget>::new(&ctx)
            .with_predicate(generation_changed)
            .start_fn(move |w| reconcile(api.clone(), log.clone(), w)))
    })
}

async fn eventually(log: &Log, what: &str, cond: impl AsyncFnMut() -> bool) {
    let mut cond = cond;
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond().await {
        let seen = log.0.lock().clone();
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out: {what}; log: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn widget(name: &str) -> Widget {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": 1},
    }))
    .unwrap()
}

#[tokio::test]
async fn generation_filter_finalizer_and_conditions_on_a_custom_resource() {
    let env = TestEnv::start().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": open, "status": open}}}}],
        },
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let log = Arc::new(Log::default());
    let established = async || {
        let crd = crds.get("widgets.example.com").await.unwrap();
        let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    };
    eventually(&log, "CRD established", established).await;

    let mut config = ManagerConfig::new("builder-crd-test");
    config.graceful_shutdown_timeout = Duration::from_secs(5);
    let manager = Manager::new(config, env.client(), log.clone())
        .with_initializers(Initializers::new().with(widgets_controller()));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));

    let widgets: Api<Widget> = Api::namespaced(env.client(), "default");
    widgets
        .create(&PostParams::default(), &widget("w1"))
        .await
        .unwrap();
    let ready_at = |generation: i64| {
        let widgets = widgets.clone();
        async move || {
            let w = widgets.get("w1").await.unwrap();
            let ready = w.status.iter().flat_map(|s| &s.conditions).any(|c| {
                c.type_ == "Ready"
                    && c.status == "True"
                    && c.observed_generation == Some(generation)
            });
            ready && w.finalizers() == [FINALIZER]
        }
    };
    eventually(
        &log,
        "w1 has the finalizer and Ready at generation 1",
        ready_at(1),
    )
    .await;

    // A status-only write by someone else: generation unchanged, so no reconcile. w2's create
    // comes after it through the same handler and lane; once w2 is applied, a reconcile of w1
    // would have shown. (The controller's own status write and finalizer add were filtered the same way.)
    let note = json!({"status": {"note": "written by another client"}});
    widgets
        .patch_status("w1", &PatchParams::default(), &Patch::Merge(&note))
        .await
        .unwrap();
    widgets
        .create(&PostParams::default(), &widget("w2"))
        .await
        .unwrap();
    eventually(&log, "w2 applied", async || log.has("apply w2 1") == 1).await;
    assert_eq!(
        log.has("apply w1 1"),
        1,
        "status-only updates must not reconcile w1"
    );

    // A spec change bumps the generation: reconciled, and the condition follows it.
    let spec = json!({"spec": {"size": 2}});
    widgets
        .patch("w1", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .unwrap();
    eventually(&log, "w1 Ready at generation 2", ready_at(2)).await;
    let w1 = widgets.get("w1").await.unwrap();
    let ready = &w1.status.unwrap().conditions[0];
    assert_eq!(ready.reason, "Reconciled");

    // Deletion: the finalizer holds the object until the cleanup ran, then it is gone.
    widgets
        .delete("w1", &DeleteParams::default())
        .await
        .unwrap();
    let gone = async || widgets.get_opt("w1").await.unwrap().is_none();
    eventually(&log, "w1 cleaned up and deleted", gone).await;
    assert_eq!(log.has("cleanup w1"), 1);

    shut_down(&stop, run, WAIT).await;
}
