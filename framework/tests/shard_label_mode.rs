//! Label mode (`--shard-assignment=label`) over in-process managers on one kube-testenv, a
//! builder-made controller sharded with no extra call: every ConfigMap is labelled once to the
//! member that owns it and each member caches only its own; a third member joining moves labels
//! to it; a killed member's objects are reclaimed; and no key is ever reconciled by two members at
//! once, nor as absent (deleted) because it is not labelled here — not after a move, and not for
//! an object labelled to nobody live that another kind's event maps to. An object whose label
//! anyone sets to a value no live member has (bogus, another cluster's, a member's that left),
//! or to a live member that does not own it, goes back to its owner at once, every time, with
//! the view unchanged.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use controller_manager::builder::ControllerBuilder;
use controller_manager::controller::{Action, Request};
use controller_manager::informer::{InformerScope, ObjectKey, SharedInformerFactory};
use controller_manager::manager::{InitContext, Initializer, Initializers, Manager, ManagerConfig};
use controller_manager::shard::{DEFAULT_VNODES, ShardLabel, View, label_key, member_value};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube_testenv::TestEnv;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const RING: &str = "m-mirror";
const NS: &str = "default";

/// What the replicas share with the test.
#[derive(Default)]
struct World {
    /// Keys in flight, by replica.
    in_flight: Mutex<HashMap<String, String>>,
    /// Reconciles that found the key in flight on another replica.
    overlaps: AtomicUsize,
    /// Reconciles of a key absent from the replica's cache (as if deleted).
    absent: AtomicUsize,
    /// (replica, key) of every reconcile with the object cached.
    log: Mutex<Vec<(String, String)>>,
    factories: Mutex<HashMap<String, SharedInformerFactory>>,
}

/// Unregisters an in-flight reconcile, also when its replica is killed mid-reconcile.
struct InFlight(Arc<World>, String);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.lock().remove(&self.1);
    }
}

type Shared = Arc<World>;

fn mirror(replica: &'static str) -> Initializer<Shared> {
    Initializer::new("mirror", move |ctx: InitContext<Shared>| async move {
        let world: Shared = (*ctx.extra).clone();
        world
            .factories
            .lock()
            .insert(replica.to_string(), ctx.factory.clone());
        // A Secret enqueues the ConfigMap of its name, cached here or not.
        let builder = ControllerBuilder::<ConfigMap>::new(&ctx)
            .scoped(InformerScope::all().in_namespace(NS))
            .watches::<Secret, _>(|s: &Secret| {
                Some(ObjectKey::from_object(s)).filter(|k| k.namespace.as_deref() == Some(NS))
            })
            .workers(2);
        let store = builder.store();
        let reconciler = tower::service_fn(move |req: Request<ObjectKey>| {
            let (world, store) = (world.clone(), store.clone());
            async move {
                let key = req.key.to_string();
                let other = world.in_flight.lock().insert(key.clone(), replica.into());
                if other.is_some_and(|o| o != replica) {
                    world.overlaps.fetch_add(1, Ordering::SeqCst);
                }
                let _guard = InFlight(world.clone(), key.clone());
                match store.get(&req.key) {
                    Some(_) => world.log.lock().push((replica.to_string(), key)),
                    None => {
                        world.absent.fetch_add(1, Ordering::SeqCst);
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok::<_, std::convert::Infallible>(Action::Done)
            }
        });
        Ok(builder.start(reconciler))
    })
    .shardable()
}

struct Replica {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    registry: Arc<Mutex<Registry>>,
}

fn start(client: &kube::Client, replica: &'static str, world: &Arc<World>) -> Replica {
    let mut config = ManagerConfig::new("m");
    config.sharded_controllers = vec!["mirror".into()];
    config.shard_assignment = "label".into();
    let le = controller_manager::testing::fast_leader_election("m", replica);
    config.leader_election = Some(le);
    let manager = Manager::new(config, client.clone(), world.clone())
        .with_initializers(Initializers::new().with(mirror(replica)));
    let registry = manager.registry();
    let stop = CancellationToken::new();
    let token = stop.clone();
    let task = tokio::spawn(async move { manager.run(token).await.expect("manager ran") });
    Replica {
        stop,
        task,
        registry,
    }
}

/// The sum of the samples of `metric` whose labels contain `labels`, on one replica.
fn sample(replica: &Replica, metric: &str, labels: &str) -> u64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &replica.registry.lock()).unwrap();
    text.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")) && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// `shard_ring_label_writes_total{reason}` of one replica.
fn writes(replica: &Replica, reason: &str) -> u64 {
    sample(
        replica,
        "shard_ring_label_writes_total",
        &format!("reason=\"{reason}\""),
    )
}

/// Polls until each of `replicas` has settled a view of `replicas.len()` members.
async fn settled(replicas: &[&Replica]) {
    let n = replicas.len() as u64;
    for _ in 0..100 {
        if replicas.iter().all(|r| {
            sample(r, "shard_ring_members", RING) == n && sample(r, "shard_ring_settled", RING) == 1
        }) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the ring of {n} never settled");
}

async fn configmaps(client: &kube::Client) -> Vec<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default()).await.unwrap().items
}

/// Polls until every ConfigMap carries the label of its owner among `members`.
async fn labelled_to(client: &kube::Client, members: &[&str]) -> BTreeMap<String, String> {
    let view = View::new(members.iter().map(|m| m.to_string()), DEFAULT_VNODES);
    let key = label_key(RING);
    let mut last = BTreeMap::new();
    for _ in 0..150 {
        last.clear();
        let mut right = true;
        for cm in configmaps(client).await {
            let k = ObjectKey::from_object(&cm);
            let owner = view.owner(&k).unwrap().to_string();
            let label = cm.metadata.labels.as_ref().and_then(|l| l.get(&key));
            right &= label == Some(&member_value(&owner));
            last.insert(k.to_string(), owner);
        }
        if right {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not every ConfigMap was labelled to its owner among {members:?}: {last:?}");
}

/// Polls until each replica's ConfigMap cache holds exactly the objects `owners` gives it.
async fn caches_hold_their_share(world: &World, owners: &BTreeMap<String, String>) {
    let mut sizes = Vec::new();
    for _ in 0..100 {
        sizes.clear();
        for (replica, factory) in world.factories.lock().iter() {
            let own = ShardLabel::new(RING, replica).own_selector();
            let cached = factory
                .informers_status()
                .into_iter()
                .filter(|s| s.kind == "ConfigMap")
                .find(|s| s.scope.label_selector.as_deref() == Some(&own))
                .map_or(0, |s| s.objects);
            let share = owners.values().filter(|o| *o == replica).count();
            sizes.push((replica.clone(), cached, share));
        }
        if sizes.iter().all(|(_, cached, share)| cached == share) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("(replica, cached, share): {sizes:?}");
}

/// Polls until every key of `owners` was reconciled (object cached) by its owner after `from`.
async fn reconciled_by_owners(world: &World, from: usize, owners: &BTreeMap<String, String>) {
    for _ in 0..100 {
        let done = {
            let log = world.log.lock();
            let seen = |k: &String, o: &String| log[from..].iter().any(|(r, l)| l == k && r == o);
            owners.iter().all(|(k, o)| seen(k, o))
        };
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not every key reconciled by its owner: {owners:?}");
}

/// No key ran on two replicas at once nor as deleted for not being labelled here; then the
/// replicas stop.
async fn no_overlap_nor_absent_then_stop(
    world: &World,
    replicas: impl IntoIterator<Item = Replica>,
) {
    assert_eq!(
        world.overlaps.load(Ordering::SeqCst),
        0,
        "a key ran twice at once"
    );
    assert_eq!(
        world.absent.load(Ordering::SeqCst),
        0,
        "a key not labelled here was reconciled as deleted"
    );
    for r in replicas {
        r.stop.cancel();
        r.task.await.unwrap();
    }
}

/// Replicas a and b, settled, and `n` ConfigMaps labelled to their owners.
async fn two_replicas_and_configmaps(
    n: usize,
) -> (
    TestEnv,
    Arc<World>,
    Replica,
    Replica,
    BTreeMap<String, String>,
) {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let world = Arc::new(World::default());
    let a = start(&client, "a", &world);
    let b = start(&client, "b", &world);
    settled(&[&a, &b]).await;
    for i in 0..n {
        create(&client, &format!("cm-{i:02}"), json!({})).await;
    }
    let owners = labelled_to(&client, &["a", "b"]).await;
    (env, world, a, b, owners)
}

async fn create(client: &kube::Client, name: &str, labels: serde_json::Value) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_mode_splits_the_cache_moves_on_join_and_reclaims_on_death() {
    let (env, world, a, b, owners) = two_replicas_and_configmaps(40).await;
    let client = env.client();
    caches_hold_their_share(&world, &owners).await;
    reconciled_by_owners(&world, 0, &owners).await;
    assert_eq!(
        (
            writes(&a, "claim") + writes(&b, "claim"),
            writes(&a, "move") + writes(&b, "move")
        ),
        (owners.len() as u64, 0),
        "every object is labelled exactly once"
    );

    // A ConfigMap labelled to no live member, and a Secret that maps to it: the ConfigMap's
    // owner claims it at once, and is not fooled meanwhile into reconciling it as deleted
    // because it does not cache it yet.
    create(
        &client,
        "stray",
        json!({label_key(RING): "0000000000000000"}),
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = serde_json::from_value(json!({"metadata": {"name": "stray"}})).unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    labelled_to(&client, &["a", "b"]).await;
    assert_eq!(writes(&a, "reclaim") + writes(&b, "reclaim"), 1);

    // A third member joins: a third of the labels move to it.
    let from = world.log.lock().len();
    let c = start(&client, "c", &world);
    let owners = labelled_to(&client, &["a", "b", "c"]).await;
    caches_hold_their_share(&world, &owners).await;
    let moved: BTreeMap<String, String> = owners
        .iter()
        .filter(|(_, o)| *o == "c")
        .map(|(k, o)| (k.clone(), o.clone()))
        .collect();
    assert!(moved.len() > 5, "c got {moved:?}");
    reconciled_by_owners(&world, from, &moved).await;
    assert!(writes(&a, "move") + writes(&b, "move") >= moved.len() as u64);

    // c dies without leaving: once its Lease expires, a and b reclaim its objects.
    let from = world.log.lock().len();
    c.task.abort();
    let _ = c.task.await;
    world.factories.lock().remove("c");
    let owners = labelled_to(&client, &["a", "b"]).await;
    caches_hold_their_share(&world, &owners).await;
    let reclaimed: BTreeMap<String, String> = moved
        .keys()
        .map(|k| (k.clone(), owners[k].clone()))
        .collect();
    reconciled_by_owners(&world, from, &reclaimed).await;
    assert!(writes(&a, "reclaim") + writes(&b, "reclaim") >= reclaimed.len() as u64);

    no_overlap_nor_absent_then_stop(&world, [a, b]).await;
}

/// Sets the ring's label of ConfigMap `name` to `value`, as anyone with `patch` may.
async fn relabel(client: &kube::Client, name: &str, value: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let patch = json!({"metadata": {"labels": {label_key(RING): value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Polls until `name` was reconciled (object cached) by `owner` after log entry `from`.
async fn reconciled_again(world: &World, from: usize, name: &str, owner: &str) {
    let one = BTreeMap::from([(format!("{NS}/{name}"), owner.to_string())]);
    reconciled_by_owners(world, from, &one).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_labelled_to_no_live_member_is_claimed_at_once_every_time() {
    let (env, world, a, b, owners) = two_replicas_and_configmaps(10).await;
    let client = env.client();
    reconciled_by_owners(&world, 0, &owners).await;
    let (victim, owner) = owners
        .iter()
        .next()
        .map(|(k, o)| (k.clone(), o.clone()))
        .unwrap();
    let victim = victim.strip_prefix("default/").unwrap().to_string();
    let other = if owner == "a" { "b" } else { "a" };

    // A user with `patch` sets the label to values no live member has, one after another in
    // one settled view (the reclaim once per view never saw the second), and to the other live
    // member's: each time the owner has it back, caches it and reconciles it, with no change of
    // membership to prompt it.
    let foreign = member_value("a-replica-of-another-cluster");
    let other_value = member_value(other);
    for value in [
        "0000000000000000",
        "not-hex",
        &foreign,
        &other_value,
        "0000000000000000",
    ] {
        let from = world.log.lock().len();
        relabel(&client, &victim, value).await;
        labelled_to(&client, &["a", "b"]).await;
        reconciled_again(&world, from, &victim, &owner).await;
    }
    // A restore from another cluster's backup: created labelled to a member of that cluster.
    let from = world.log.lock().len();
    create(&client, "restored", json!({label_key(RING): foreign})).await;
    let owners = labelled_to(&client, &["a", "b"]).await;
    reconciled_again(&world, from, "restored", &owners["default/restored"]).await;
    let count = |reason| writes(&a, reason) + writes(&b, reason);
    assert_eq!((count("reclaim"), count("move")), (5, 1));

    // A third member joins and leaves: the view of a and b comes back, and the label of the
    // member that left is claimed in it too.
    let c = start(&client, "c", &world);
    settled(&[&a, &b, &c]).await;
    c.stop.cancel();
    c.task.await.unwrap();
    world.factories.lock().remove("c");
    settled(&[&a, &b]).await;
    labelled_to(&client, &["a", "b"]).await;
    let from = world.log.lock().len();
    relabel(&client, &victim, &member_value("c")).await;
    labelled_to(&client, &["a", "b"]).await;
    reconciled_again(&world, from, &victim, &owner).await;

    no_overlap_nor_absent_then_stop(&world, [a, b]).await;
}
