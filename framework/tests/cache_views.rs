//! Views of one kind end to end over HTTP against kube-testenv: a metadata-only controller and
//! a full-object controller on Secrets open one LIST/WATCH between them; metadata-only
//! controllers alone get a metadata watch; a controller over a kind given at run time waits for
//! a CRD created after the manager started and picks it up once Established, /readyz failing
//! meanwhile on a check whose logged reason names the kind; and the kinds an
//! informer can never list fail the manager's start with the reason.

mod support;

use std::sync::Arc;
use std::time::Duration;

use controller_manager::builder::ControllerBuilder;
use controller_manager::controller::Action;
use controller_manager::informer::{
    CacheOptions, InformerStatus, KindOptions, SharedInformerFactory,
};
use controller_manager::manager::{InitContext, Initializer, Initializers, Manager, ManagerConfig};
use controller_manager::testing::{ManagerTask, Requests, TestEnv};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::core::{DynamicObject, PartialObjectMeta};
use parking_lot::Mutex;
use serde_json::json;
use support::until;

/// What the controllers saw, and the manager's factory (for its informers' status).
#[derive(Default)]
struct Seen {
    lines: Mutex<Vec<String>>,
    factory: Mutex<Option<SharedInformerFactory>>,
}

impl Seen {
    fn push(&self, line: String) {
        self.lines.lock().push(line);
    }

    fn has(&self, line: &str) -> bool {
        self.lines.lock().iter().any(|l| l == line)
    }

    fn status(&self) -> Vec<InformerStatus> {
        self.factory
            .lock()
            .as_ref()
            .map(SharedInformerFactory::informers_status)
            .unwrap_or_default()
    }

    async fn until(&self, manager: &mut ManagerTask, what: &str, cond: impl Fn(&Seen) -> bool) {
        manager
            .until(what, async {
                while !cond(self) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await
            .unwrap_or_else(|e| panic!("{e}; seen: {:?}", self.lines.lock()));
    }
}

type Ctx = InitContext<Arc<Seen>>;

/// What the test's tracing subscriber logged.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock()).into_owned()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;

    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

/// `name` reconciles Secrets' metadata: `<name> <Secret> team=<label>`.
fn metadata_controller(name: &'static str) -> Initializer<Arc<Seen>> {
    Initializer::new(name, move |ctx: Ctx| async move {
        *ctx.extra.factory.lock() = Some(ctx.factory.clone());
        let seen = ctx.extra.clone();
        Ok(
            ControllerBuilder::<PartialObjectMeta<Secret>>::new(&ctx).start_fn(
                move |s: Arc<PartialObjectMeta<Secret>>| {
                    let team = s.labels().get("team").cloned().unwrap_or_default();
                    seen.push(format!("{name} {} team={team}", s.name_any()));
                    async { Ok::<_, std::convert::Infallible>(Action::Done) }
                },
            ),
        )
    })
}

/// Reconciles whole Secrets: `full <name> keys=<data keys>`.
fn full_controller() -> Initializer<Arc<Seen>> {
    Initializer::new("secret-full", |ctx: Ctx| async move {
        let seen = ctx.extra.clone();
        Ok(
            ControllerBuilder::<Secret>::new(&ctx).start_fn(move |s: Arc<Secret>| {
                let keys: Vec<String> = s.data.iter().flatten().map(|(k, _)| k.clone()).collect();
                seen.push(format!("full {} keys={}", s.name_any(), keys.join(",")));
                async { Ok::<_, std::convert::Infallible>(Action::Done) }
            }),
        )
    })
}

fn config(name: &str, watch_list: bool) -> ManagerConfig {
    let mut config = ManagerConfig::new(name);
    config.graceful_shutdown_timeout = Duration::from_secs(5);
    config.watch_list = watch_list;
    config
}

fn manager(
    env: &TestEnv,
    config: ManagerConfig,
    inits: Initializers<Arc<Seen>>,
) -> (ManagerTask, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let manager = Manager::new(config, env.client(), seen.clone()).with_initializers(inits);
    (ManagerTask::start(manager), seen)
}

async fn secrets(env: &TestEnv) {
    let api: Api<Secret> = Api::namespaced(env.client(), "default");
    for (name, team) in [("a", "x"), ("b", "y")] {
        let secret = json!({"metadata": {"name": name, "labels": {"team": team}}, "stringData": {"key": "value"}});
        let secret: Secret = serde_json::from_value(secret).unwrap();
        api.create(&PostParams::default(), &secret).await.unwrap();
    }
}

/// The requests for Secrets once `watches` WATCHes are among them (or after 10 s). Objects can
/// reach the controllers from a LIST before the WATCH that follows it is in the request log, so
/// counting at once can miss it; waiting for it still counts a second one.
async fn secrets_once_watched(env: &TestEnv, watches: usize) -> Requests {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while Requests::of(env).resource("secrets").verb("watch").count() < watches
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Requests::of(env).resource("secrets")
}

async fn one_watch_for_a_metadata_and_a_full_controller(watch_list: bool) {
    let env = TestEnv::start().await.unwrap();
    secrets(&env).await;
    env.clear_requests();
    let inits = Initializers::new()
        .with(metadata_controller("meta"))
        .with(full_controller());
    let (mut manager, seen) = manager(&env, config("views", watch_list), inits);
    seen.until(
        &mut manager,
        "both controllers reconciled both Secrets",
        |s| {
            [
                "meta a team=x",
                "meta b team=y",
                "full a keys=key",
                "full b keys=key",
            ]
            .iter()
            .all(|l| s.has(l))
        },
    )
    .await;
    let status = seen.status();
    assert_eq!(status.len(), 1, "{status:?}");
    assert_eq!(status[0].metadata_only, Some(false));

    // Streaming lists: one WATCH carries the list; otherwise one LIST and one WATCH.
    let expected = if watch_list { (0, 1) } else { (1, 1) };
    let secrets = secrets_once_watched(&env, expected.1).await;
    let (lists, watches) = (
        secrets.clone().verb("list").count(),
        secrets.clone().verb("watch").count(),
    );
    assert_eq!(
        (lists, watches),
        expected,
        "{:?}",
        secrets.per_verb_and_resource()
    );
    assert_eq!(secrets.metadata_only().count(), 0, "whole objects for both");
    manager.stop().await.unwrap();
}

#[tokio::test]
async fn a_metadata_and_a_full_controller_share_one_streaming_list() {
    one_watch_for_a_metadata_and_a_full_controller(true).await;
}

#[tokio::test]
async fn a_metadata_and_a_full_controller_share_one_list_and_watch() {
    one_watch_for_a_metadata_and_a_full_controller(false).await;
}

#[tokio::test]
async fn metadata_only_controllers_watch_metadata() {
    let env = TestEnv::start().await.unwrap();
    secrets(&env).await;
    env.clear_requests();
    let inits = Initializers::new()
        .with(metadata_controller("meta"))
        .with(metadata_controller("meta2"));
    let (mut manager, seen) = manager(&env, config("metadata", true), inits);
    seen.until(
        &mut manager,
        "both metadata controllers reconciled both Secrets",
        |s| {
            [
                "meta a team=x",
                "meta b team=y",
                "meta2 a team=x",
                "meta2 b team=y",
            ]
            .iter()
            .all(|l| s.has(l))
        },
    )
    .await;
    let status = seen.status();
    assert_eq!(status.len(), 1, "{status:?}");
    assert_eq!(status[0].metadata_only, Some(true));
    let secrets = secrets_once_watched(&env, 1).await;
    let watches = secrets.clone().verb("watch");
    assert_eq!(watches.count(), 1, "{:?}", secrets.per_verb_and_resource());
    assert_eq!(
        watches.metadata_only().count(),
        1,
        "Accept: ...;as=PartialObjectMetadata"
    );
    assert_eq!(
        secrets.clone().metadata_only().count(),
        secrets.count(),
        "no request for whole Secrets"
    );
    manager.stop().await.unwrap();
}

/// Reconciles the run-time kind `kind` as `DynamicObject`: `dynamic <name> <spec.size>`.
fn dynamic_controller(kind: &'static str) -> Initializer<Arc<Seen>> {
    Initializer::new("dynamic", move |ctx: Ctx| async move {
        *ctx.extra.factory.lock() = Some(ctx.factory.clone());
        let seen = ctx.extra.clone();
        Ok(
            ControllerBuilder::<DynamicObject>::dynamic(&ctx, kind)?.start_fn(
                move |w: Arc<DynamicObject>| {
                    seen.push(format!(
                        "dynamic {} {}",
                        w.name_any(),
                        w.data["spec"]["size"]
                    ));
                    async { Ok::<_, std::convert::Infallible>(Action::Done) }
                },
            ),
        )
    })
}

#[tokio::test]
async fn a_dynamic_controller_picks_up_a_crd_created_after_the_manager_started() {
    let env = TestEnv::start().await.unwrap();
    let inits = Initializers::new()
        .with(dynamic_controller("example.com/v1/Widget"))
        .with(full_controller());
    let admin = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut config = config("dynamic", true);
    config.admin_addr = Some(admin);
    let logs = Logs::default();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .finish(),
    );
    let (mut manager, seen) = manager(&env, config, inits);
    // The other controller runs; the Widget informer says what it waits for.
    secrets(&env).await;
    seen.until(&mut manager, "the Secret controller runs meanwhile", |s| {
        s.has("full a keys=key")
    })
    .await;
    seen.until(&mut manager, "the Widget informer waits", |s| {
        s.status().iter().any(|st| {
            st.waiting
                .as_deref()
                .is_some_and(|w| w.contains("example.com/v1/Widget to be served"))
        })
    })
    .await;
    let readiness = seen
        .status()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    let waiting = "Widget.example.com is waiting for example.com/v1/Widget to be served";
    assert!(readiness.contains(waiting), "{readiness}");
    // /readyz fails on the informer-sync check, whose reason (in the log) names the kind.
    let (_, body) = until(admin, "/readyz?verbose", |status, body| {
        status == 500 && body.contains("[-]informer-sync failed")
    })
    .await;
    assert!(body.contains("readyz check failed"), "{body}");
    let logged = logs.text();
    assert!(
        logged.contains("check=informer-sync") && logged.contains(waiting),
        "{logged}"
    );

    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let crd = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": open}}}}],
        },
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        env.client(),
        "default",
        &kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "example.com",
            "v1",
            "Widget",
        )),
    );
    let widget = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"size": 3},
    }))
    .unwrap();
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();
    seen.until(&mut manager, "the Widget is reconciled, no restart", |s| {
        s.has("dynamic w1 3")
    })
    .await;
    let widget_status = seen
        .status()
        .into_iter()
        .find(|s| s.kind == "Widget.example.com")
        .unwrap();
    assert!(
        widget_status.synced && widget_status.waiting.is_none(),
        "{widget_status:?}"
    );
    until(admin, "/readyz", |status, _| status == 200).await;
    manager.stop().await.unwrap();
}

/// Starts a manager whose one controller is `init` and returns its start-up error.
async fn start_error(env: &TestEnv, init: Initializer<Arc<Seen>>, cache: CacheOptions) -> String {
    let mut config = ManagerConfig::new("bad-input");
    config.cache = cache;
    let manager = Manager::new(config, env.client(), Arc::new(Seen::default()))
        .with_initializers(Initializers::new().with(init));
    let exit = ManagerTask::start(manager).exit().await.unwrap();
    let error = exit.error().expect("the manager fails to start");
    format!("{error}")
}

#[tokio::test]
async fn kinds_an_informer_cannot_list_fail_the_start_with_the_reason() {
    let env = TestEnv::start().await.unwrap();
    let unknown = start_error(&env, dynamic_controller("v1/Secrte"), CacheOptions::new()).await;
    assert!(
        unknown.contains("unknown kind v1/Secrte: v1 serves"),
        "{unknown}"
    );
    let version = start_error(
        &env,
        dynamic_controller("apps/v9/Deployment"),
        CacheOptions::new(),
    )
    .await;
    assert!(
        version.contains("unknown kind apps/v9/Deployment: the API server serves no apps/v9"),
        "{version}"
    );
    let create_only = start_error(
        &env,
        dynamic_controller("authentication.k8s.io/v1/TokenReview"),
        CacheOptions::new(),
    )
    .await;
    assert!(
        create_only.contains("is not served for list and watch (it serves create)"),
        "{create_only}"
    );
    let malformed = start_error(&env, dynamic_controller("Secret"), CacheOptions::new()).await;
    assert!(
        malformed.contains("unknown kind \"Secret\": write it as apiVersion/Kind"),
        "{malformed}"
    );

    let bad_selector =
        CacheOptions::new().kind::<ConfigMap>(KindOptions::new().fields("spec.nope=1"));
    let configmaps = Initializer::new("configmaps", |ctx: Ctx| async move {
        Ok(
            ControllerBuilder::<ConfigMap>::new(&ctx).start_fn(|_: Arc<ConfigMap>| async {
                Ok::<_, std::convert::Infallible>(Action::Done)
            }),
        )
    });
    let refused = start_error(&env, configmaps, bad_selector).await;
    assert!(
        refused.contains("ConfigMap (fields=spec.nope=1)"),
        "{refused}"
    );
    assert!(
        refused.contains("the API server refused its list (400"),
        "{refused}"
    );
}
