//! A SecretMirror-style controller on the builder, against kube-testenv: a mirror (a ConfigMap in
//! `mirrors` naming a source Secret and target namespaces) copies its source into each target.
//! The watched Secrets come from scoped informers (the sources' namespace; the copies' label), so
//! the process caches no other Secret and lists and watches none; a change to the source finds
//! its mirror through an index and re-reconciles it; a deleted copy in another namespace is
//! mapped back to its mirror by annotation and written again. Run with `testing`'s helpers,
//! whose waits end at once with a manager's start-up error and time out with the last state seen.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use controller_manager::builder::ControllerBuilder;
use controller_manager::controller::Action;
use controller_manager::informer::{InformerScope, ObjectKey, Store};
use controller_manager::manager::{
    InitContext, InitError, InitOutcome, Initializer, Initializers, Manager, ManagerConfig,
};
use controller_manager::testing::{ManagerTask, Requests, TestEnv};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Label (for the copies' informer to select on) and annotation (`namespace/name` of the mirror).
const MIRRORED_FROM: &str = "example.com/mirrored-from";
const SOURCE_INDEX: &str = "source";

/// The stores the controller built, handed to the test to look into.
#[derive(Default)]
struct Stores {
    mirrors: OnceLock<Store<ConfigMap>>,
    sources: OnceLock<Store<Secret>>,
}

fn data(cm: &ConfigMap, key: &str) -> Option<String> {
    cm.data.as_ref()?.get(key).cloned()
}

async fn reconcile(
    client: Client,
    sources: Store<Secret>,
    mirror: Arc<ConfigMap>,
) -> Result<Action, kube::Error> {
    let source = data(&mirror, "source").map(|s| ObjectKey::parse(&s));
    let Some(source) = source.and_then(|key| sources.get(&key)) else {
        return Ok(Action::Done);
    };
    let owner = ObjectKey::from_object(mirror.as_ref()).to_string();
    for target in data(&mirror, "targets").unwrap_or_default().split(',') {
        let copy = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {
                "name": source.name_any(), "namespace": target,
                "labels": {MIRRORED_FROM: "true"}, "annotations": {MIRRORED_FROM: owner},
            },
            "data": source.data,
        });
        let params = PatchParams::apply("secret-mirror").force();
        Api::<Secret>::namespaced(client.clone(), target)
            .patch(&source.name_any(), &params, &Patch::Apply(&copy))
            .await?;
    }
    Ok(Action::Done)
}

async fn init(ctx: InitContext<Arc<Stores>>) -> Result<InitOutcome, InitError> {
    let sources = InformerScope::all().in_namespace("sources");
    let copies = InformerScope::all().with_labels(MIRRORED_FROM);
    let builder = ControllerBuilder::<ConfigMap>::new(&ctx)
        .scoped(InformerScope::all().in_namespace("mirrors"))
        .index(SOURCE_INDEX, |m: &ConfigMap| {
            data(m, "source").into_iter().collect()
        })?;
    let (mirrors, secrets) = (builder.store(), builder.watched_store(sources.clone()));
    let _ = ctx.extra.mirrors.set(mirrors.clone());
    let _ = ctx.extra.sources.set(secrets.clone());
    let client = ctx.client.clone();
    Ok(builder
        // Which mirrors copy this Secret? The index answers without scanning every mirror.
        .watches_scoped(sources, move |s: &Secret| {
            let source = ObjectKey::from_object(s).to_string();
            let found = mirrors.by_index(SOURCE_INDEX, &source);
            found
                .iter()
                .map(|m| ObjectKey::from_object(m.as_ref()))
                .collect::<Vec<_>>()
        })
        // The copies live in other namespaces: no owner reference, an annotation names the mirror.
        .watches_annotated::<Secret>(copies, MIRRORED_FROM)
        .start_fn(move |mirror| reconcile(client.clone(), secrets.clone(), mirror)))
}

async fn create<K>(api: &Api<K>, obj: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

fn password(value: &'static str) -> impl Fn(Option<&Secret>) -> bool {
    move |s| {
        let data = s.and_then(|s| s.data.clone()).unwrap_or_default();
        data.get("password") == Some(&ByteString(value.as_bytes().to_vec()))
    }
}

#[tokio::test]
async fn scoped_watches_an_index_and_annotated_copies_across_namespaces() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in ["sources", "mirrors", "team-a", "team-b", "other"] {
        create(&namespaces, json!({"metadata": {"name": ns}})).await;
    }
    let secret = |ns: &str| Api::<Secret>::namespaced(client.clone(), ns);
    let db =
        |password: &str| json!({"metadata": {"name": "db"}, "stringData": {"password": password}});
    create(&secret("sources"), db("one")).await;
    create(&secret("other"), db("not mirrored")).await;
    let spec = BTreeMap::from([("source", "sources/db"), ("targets", "team-a,team-b")]);
    let mirrors: Api<ConfigMap> = Api::namespaced(client.clone(), "mirrors");
    create(
        &mirrors,
        json!({"metadata": {"name": "db-mirror"}, "data": spec}),
    )
    .await;

    let stores = Arc::new(Stores::default());
    let manager = Manager::new(
        ManagerConfig::new("mirror-test"),
        client.clone(),
        stores.clone(),
    )
    .with_initializers(Initializers::new().with(Initializer::new("secret-mirror", init)));
    let mut manager = ManagerTask::start(manager);
    for ns in ["team-a", "team-b"] {
        let what = format!("{ns}/db copied");
        manager
            .wait_for(&secret(ns), "db", &what, password("one"))
            .await
            .unwrap();
    }

    // Scoped: the sources' store holds the one Secret of `sources`, and the process listed and
    // watched Secrets only in that namespace and by the copies' label, never cluster-wide.
    let sources = stores.sources.get().unwrap();
    assert_eq!(sources.keys(), [ObjectKey::namespaced("sources", "db")]);
    let secrets = Requests::of(&env).resource("secrets").without_waits();
    let watches = secrets.clone().verb("watch");
    let in_sources = watches.clone().namespace(Some("sources")).count();
    let labelled = watches
        .clone()
        .param("labelSelector", MIRRORED_FROM)
        .count();
    assert_eq!(
        (in_sources, labelled, watches.count()),
        (1, 1, 2),
        "{:?}",
        secrets.per_verb_and_resource()
    );
    // The index the mapper uses answers "which mirrors copy sources/db".
    let mirrors_store = stores.mirrors.get().unwrap();
    let found = mirrors_store.by_index(SOURCE_INDEX, "sources/db");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name_any(), "db-mirror");

    // A change to the source re-reconciles its mirror (found through the index).
    let two = json!({"stringData": {"password": "two"}});
    let params = PatchParams::default();
    secret("sources")
        .patch("db", &params, &Patch::Merge(&two))
        .await
        .unwrap();
    for ns in ["team-a", "team-b"] {
        let what = format!("{ns}/db follows the source");
        manager
            .wait_for(&secret(ns), "db", &what, password("two"))
            .await
            .unwrap();
    }

    // A deleted copy in another namespace maps back to its mirror by annotation: written again.
    let old = secret("team-b").get("db").await.unwrap().uid();
    secret("team-b")
        .delete("db", &DeleteParams::default())
        .await
        .unwrap();
    let recreated = move |s: Option<&Secret>| s.is_some_and(|s| s.uid() != old);
    manager
        .wait_for(
            &secret("team-b"),
            "db",
            "team-b/db written again",
            recreated,
        )
        .await
        .unwrap();
    manager.stop().await.unwrap();
}

/// A start-up error ends the wait at once, with the error: here an index name taken twice on
/// one shared informer, which the builder refuses.
#[tokio::test]
async fn a_manager_that_fails_to_start_fails_the_wait_with_its_error() {
    let env = TestEnv::start().await.unwrap();
    let twice = Initializer::new("twice", |ctx: InitContext<()>| async move {
        let by_name = |m: &ConfigMap| vec![m.name_any()];
        let builder = ControllerBuilder::<ConfigMap>::new(&ctx)
            .index("by-name", by_name)?
            .index("by-name", by_name)?;
        Ok(builder.start_fn(|_| async { Ok::<_, kube::Error>(Action::Done) }))
    });
    let manager = Manager::new(ManagerConfig::new("fails"), env.client(), ())
        .with_initializers(Initializers::new().with(twice));
    let mut manager = ManagerTask::start(manager);
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let never = |_: Option<&ConfigMap>| false;
    let error = manager
        .wait_for(&configmaps, "none", "nothing", never)
        .await
        .unwrap_err();
    let exit = error.exit().expect("the manager's exit, not a timeout");
    let message = exit.error().map(ToString::to_string).unwrap_or_default();
    assert!(
        message.contains("already has an index named \"by-name\""),
        "{error}"
    );
}

/// A wait that times out says what it saw last: the object, without managedFields.
#[tokio::test]
async fn a_timed_out_wait_shows_the_object_as_last_seen() {
    let env = TestEnv::start().await.unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let cm = json!({"metadata": {"name": "seen"}, "data": {"state": "pending"}});
    create(&configmaps, cm).await;
    let idle = |stop: CancellationToken| async move {
        stop.cancelled().await;
        Ok::<_, std::io::Error>(())
    };
    let mut manager = ManagerTask::spawn(idle).with_timeout(Duration::from_secs(2));
    let done = |cm: Option<&ConfigMap>| data(cm.unwrap(), "state").as_deref() == Some("done");
    let error = manager
        .wait_for(&configmaps, "seen", "state done", done)
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("state done: not within 2s; last seen: {"),
        "{message}"
    );
    assert!(message.contains(r#""state": "pending""#), "{message}");
    assert!(!message.contains("managedFields"), "{message}");
    manager.stop().await.unwrap();
}
