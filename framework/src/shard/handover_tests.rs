//! The handover proof under tokio's paused clock: several members share one in-memory Lease
//! store, each runs a reconcile workload through `admit`, and every reconcile is logged; the log
//! must show no key reconciled by two members at once, and every key reconciled by its new owner
//! after scale-up, graceful leave, a killed member and a partitioned member.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use kube::core::Status;
use tokio::task::JoinHandle;
use tokio::time::sleep;

use super::*;
use crate::leader::store::LeaseStore;
use crate::shard::ring::stable_hash;

/// The API server's Lease collection: resourceVersion checks on replace, 409 on a second create.
#[derive(Default)]
struct World {
    leases: Mutex<BTreeMap<String, Lease>>,
    rv: AtomicU64,
}

/// One member's view of the world; `cut` makes every call fail (a partition).
struct MemberStore {
    world: Arc<World>,
    name: String,
    cut: AtomicBool,
}

fn api_error(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(Status::failure(reason, reason).with_code(code).boxed())
}

impl MemberStore {
    fn check(&self) -> Result<(), kube::Error> {
        if self.cut.load(Ordering::SeqCst) {
            Err(api_error(503, "ServiceUnavailable"))
        } else {
            Ok(())
        }
    }

    fn write(&self, leases: &mut BTreeMap<String, Lease>, mut lease: Lease) -> Lease {
        let rv = self.world.rv.fetch_add(1, Ordering::SeqCst) + 1;
        lease.metadata.resource_version = Some(rv.to_string());
        leases.insert(self.name.clone(), lease.clone());
        lease
    }
}

impl LeaseStore for MemberStore {
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, kube::Error>> {
        let r = self
            .check()
            .map(|()| self.world.leases.lock().get(&self.name).cloned());
        async move { r }.boxed()
    }

    fn create(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, kube::Error>> {
        let r = self.check().and_then(|()| {
            let mut leases = self.world.leases.lock();
            if leases.contains_key(&self.name) {
                Err(api_error(409, "AlreadyExists"))
            } else {
                Ok(self.write(&mut leases, lease))
            }
        });
        async move { r }.boxed()
    }

    fn replace(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, kube::Error>> {
        let r = self.check().and_then(|()| {
            let mut leases = self.world.leases.lock();
            let current = leases
                .get(&self.name)
                .and_then(|l| l.metadata.resource_version.clone());
            if current.is_none() || current != lease.metadata.resource_version {
                Err(api_error(409, "Conflict"))
            } else {
                Ok(self.write(&mut leases, lease))
            }
        });
        async move { r }.boxed()
    }
}

impl RingStore for MemberStore {
    fn list(&self) -> BoxFuture<'_, Result<Vec<Lease>, kube::Error>> {
        let r = self
            .check()
            .map(|()| self.world.leases.lock().values().cloned().collect());
        async move { r }.boxed()
    }

    fn delete(&self) -> BoxFuture<'_, Result<(), kube::Error>> {
        let r = self.check().map(|()| {
            self.world.leases.lock().remove(&self.name);
        });
        async move { r }.boxed()
    }

    fn delete_expired<'a>(
        &'a self,
        name: &'a str,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<bool, kube::Error>> {
        let r = self.check().map(|()| {
            let mut leases = self.world.leases.lock();
            let current = leases
                .get(name)
                .and_then(|l| l.metadata.resource_version.as_deref());
            current == Some(resource_version) && leases.remove(name).is_some()
        });
        async move { r }.boxed()
    }
}

/// One reconcile: who, which key, when it started and ended (None: still running).
#[derive(Clone, Debug)]
struct Entry {
    member: String,
    key: ObjectKey,
    start: Instant,
    end: Option<Instant>,
}

type Log = Arc<Mutex<Vec<Entry>>>;

/// No key has two reconciles whose intervals overlap.
fn check_no_overlap(log: &[Entry]) -> Result<(), String> {
    let mut by_key: BTreeMap<&ObjectKey, Vec<&Entry>> = BTreeMap::new();
    for e in log {
        by_key.entry(&e.key).or_default().push(e);
    }
    for (key, mut entries) in by_key {
        entries.sort_by_key(|e| e.start);
        for pair in entries.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.end.is_none_or(|end| end > b.start) {
                return Err(format!(
                    "{key}: {} ({:?}..{:?}) overlaps {} from {:?}",
                    a.member, a.start, a.end, b.member, b.start
                ));
            }
        }
    }
    Ok(())
}

/// Every key was reconciled, starting at or after `since`, only by its owner under `members`.
fn check_reconciled_by_owner(log: &[Entry], keys: &[ObjectKey], since: Instant, members: &[&str]) {
    let view = View::new(members.iter().map(|m| m.to_string()), VNODES);
    for k in keys {
        let after: Vec<&Entry> = log
            .iter()
            .filter(|e| &e.key == k && e.start >= since)
            .collect();
        assert!(!after.is_empty(), "{k} not reconciled after {since:?}");
        let owner = view.owner(k).unwrap();
        for e in after {
            assert_eq!(e.member, owner, "{k} reconciled by a non-owner");
        }
    }
}

const VNODES: u32 = 64;

/// A replica: its ring, its store (to partition it), and tokens to stop or kill it.
struct Member {
    id: String,
    ring: Ring,
    store: Arc<MemberStore>,
    stop: CancellationToken,
    kill: CancellationToken,
    run: JoinHandle<()>,
}

fn keys() -> Vec<ObjectKey> {
    (0..40)
        .map(|i| ObjectKey::namespaced("ns", format!("obj-{i}")))
        .collect()
}

fn start(world: &Arc<World>, id: &str, log: &Log) -> Member {
    start_with(world, id, log, Duration::ZERO)
}

/// Member `id`'s ring over `world` (lease 2 s, renew deadline 1 s, retry 200 ms), not running.
fn ring_of(world: &Arc<World>, id: &str) -> (Ring, Arc<MemberStore>) {
    let mut cfg = RingConfig::new("web", "kube-system", id);
    cfg.lease.lease_duration = Duration::from_secs(2);
    cfg.lease.renew_deadline = Duration::from_secs(1);
    cfg.lease.retry_period = Duration::from_millis(200);
    cfg.vnodes = VNODES;
    let store = Arc::new(MemberStore {
        world: world.clone(),
        name: lease_name("web", id),
        cut: AtomicBool::new(false),
    });
    (Ring::with_store(store.clone(), cfg).unwrap(), store)
}

/// A member whose reconciles take `extra` longer, to show they are dropped on lost membership.
fn start_with(world: &Arc<World>, id: &str, log: &Log, extra: Duration) -> Member {
    let (ring, store) = ring_of(world, id);
    let (stop, kill) = (CancellationToken::new(), CancellationToken::new());
    let run = tokio::spawn({
        let (ring, stop) = (ring.clone(), stop.clone());
        async move { ring.run(stop).await }
    });
    tokio::spawn(workload(
        ring.clone(),
        id.to_string(),
        log.clone(),
        kill.clone(),
        extra,
    ));
    Member {
        id: id.to_string(),
        ring,
        store,
        stop,
        kill,
        run,
    }
}

/// Tries every key every 50 ms; each admitted reconcile takes 10–300 ms (a stable pseudo-random
/// draw) plus `extra`, or ends early when membership is lost or the process is killed.
async fn workload(ring: Ring, member: String, log: Log, kill: CancellationToken, extra: Duration) {
    let mut draw = 0u64;
    while !kill.is_cancelled() {
        for key in keys() {
            let Some(admitted) = ring.admit(&key) else {
                continue;
            };
            draw += 1;
            let ms = 10 + stable_hash(format!("{member}{key}{draw}").as_bytes()) % 290;
            let (log, member, kill) = (log.clone(), member.clone(), kill.clone());
            tokio::spawn(async move {
                let idx = {
                    let mut log = log.lock();
                    log.push(Entry {
                        member,
                        key,
                        start: Instant::now(),
                        end: None,
                    });
                    log.len() - 1
                };
                tokio::select! {
                    _ = sleep(Duration::from_millis(ms) + extra) => {}
                    _ = admitted.lost().cancelled() => {}
                    _ = kill.cancelled() => {}
                }
                log.lock()[idx].end = Some(Instant::now());
                drop(admitted);
            });
        }
        tokio::select! {
            _ = sleep(Duration::from_millis(50)) => {}
            _ = kill.cancelled() => {}
        }
    }
}

fn snapshot(log: &Log) -> Vec<Entry> {
    log.lock().clone()
}

async fn settle() {
    sleep(Duration::from_secs(3)).await;
}

#[test]
fn the_checker_catches_an_overlap() {
    let t = Instant::now();
    let k = ObjectKey::namespaced("ns", "a");
    let e = |m: &str, s: u64, end: Option<u64>| Entry {
        member: m.into(),
        key: k.clone(),
        start: t + Duration::from_millis(s),
        end: end.map(|e| t + Duration::from_millis(e)),
    };
    assert!(check_no_overlap(&[e("a", 0, Some(10)), e("b", 10, Some(20))]).is_ok());
    assert!(check_no_overlap(&[e("a", 0, Some(11)), e("b", 10, Some(20))]).is_err());
    assert!(check_no_overlap(&[e("b", 10, Some(20)), e("a", 0, None)]).is_err());
}

#[tokio::test(start_paused = true)]
async fn scale_up_hands_keys_to_the_new_member_without_overlap() {
    let (world, log) = (Arc::new(World::default()), Log::default());
    let _a = start(&world, "a", &log);
    let _b = start(&world, "b", &log);
    settle().await;
    check_reconciled_by_owner(
        &snapshot(&log),
        &keys(),
        Instant::now() - Duration::from_secs(1),
        &["a", "b"],
    );
    let _c = start(&world, "c", &log);
    settle().await;
    let since = Instant::now();
    sleep(Duration::from_secs(1)).await;
    let log = snapshot(&log);
    check_no_overlap(&log).unwrap();
    check_reconciled_by_owner(&log, &keys(), since, &["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn graceful_leave_hands_over_before_the_lease_could_expire() {
    let (world, log) = (Arc::new(World::default()), Log::default());
    let _a = start(&world, "a", &log);
    let _b = start(&world, "b", &log);
    let c = start(&world, "c", &log);
    settle().await;
    c.stop.cancel();
    c.run.await.unwrap();
    assert!(!world.leases.lock().contains_key(&lease_name("web", "c")));
    // Well within the 2 s lease duration: the deleted Lease needs no expiry.
    sleep(Duration::from_millis(1_200)).await;
    let since = Instant::now();
    sleep(Duration::from_secs(1)).await;
    let log = snapshot(&log);
    check_no_overlap(&log).unwrap();
    check_reconciled_by_owner(&log, &keys(), since, &["a", "b"]);
    assert!(c.ring.admit(&keys()[0]).is_none());
}

#[tokio::test(start_paused = true)]
async fn a_killed_member_is_replaced_after_its_lease_expires() {
    let (world, log) = (Arc::new(World::default()), Log::default());
    let _a = start(&world, "a", &log);
    let _b = start(&world, "b", &log);
    let c = start(&world, "c", &log);
    settle().await;
    c.kill.cancel();
    c.run.abort();
    settle().await;
    // Expired (2 s after its last renewal) but not yet for one more lease duration: still there.
    assert!(world.leases.lock().contains_key(&lease_name("web", "c")));
    let since = Instant::now();
    sleep(Duration::from_secs(1)).await;
    let log = snapshot(&log);
    check_no_overlap(&log).unwrap();
    check_reconciled_by_owner(&log, &keys(), since, &["a", "b"]);
    // Expired for one more lease duration: the survivors delete c's Lease.
    sleep(Duration::from_secs(2)).await;
    assert!(!world.leases.lock().contains_key(&lease_name("web", "c")));
    assert_eq!(world.leases.lock().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_member_stops_before_its_lease_expires_and_rejoins() {
    let (world, log) = (Arc::new(World::default()), Log::default());
    let _a = start(&world, "a", &log);
    let _b = start(&world, "b", &log);
    // c's reconciles outlast any lease: only dropping them on lost membership avoids overlap.
    let c = start_with(&world, "c", &log, Duration::from_secs(30));
    settle().await;
    assert!((c.ring.health_check())().is_ok());
    assert!(
        snapshot(&log)
            .iter()
            .any(|e| e.member == "c" && e.end.is_none())
    );
    c.store.cut.store(true, Ordering::SeqCst);
    settle().await;
    assert!((c.ring.health_check())().is_err());
    let since = Instant::now();
    sleep(Duration::from_secs(1)).await;
    let during = snapshot(&log);
    check_no_overlap(&during).unwrap();
    check_reconciled_by_owner(&during, &keys(), since, &["a", "b"]);
    // Cut off for long enough, c is dead to the others: they delete its Lease, and c, once it
    // can renew again, creates it anew and rejoins.
    sleep(Duration::from_secs(2)).await;
    assert!(!world.leases.lock().contains_key(&lease_name("web", "c")));
    c.store.cut.store(false, Ordering::SeqCst);
    let healed = Instant::now();
    settle().await;
    sleep(Duration::from_secs(1)).await;
    let log = snapshot(&log);
    check_no_overlap(&log).unwrap();
    // c's (30 s) reconciles are still running; each key has started under its final owner.
    let view = View::new(["a", "b", "c"].map(String::from), VNODES);
    for k in keys() {
        let owner = view.owner(&k).unwrap();
        assert!(
            log.iter()
                .any(|e| e.key == k && e.start >= healed && e.member == owner),
            "{k} not taken up by {owner} after the partition healed"
        );
    }
    assert!(log.iter().any(|e| e.member == c.id && e.start >= healed));
    assert!(world.leases.lock().contains_key(&lease_name("web", "c")));
}

#[test]
fn a_peer_with_another_assignment_mode_is_warned_about_once_while_it_stays() {
    let cfg = RingConfig::new("web", "kube-system", "a");
    let peer = |id: &str, mode: Option<&str>| super::Peer {
        identity: id.into(),
        view: None,
        assignment: mode.map(String::from),
    };
    let mut warned = std::collections::HashSet::new();
    let ring = [
        peer("b", Some("hash")),
        peer("c", Some("label")),
        peer("d", None),
    ];
    assert_eq!(warn_mixed_modes(&cfg, &ring, &mut warned), ["c"]);
    assert!(warn_mixed_modes(&cfg, &ring, &mut warned).is_empty());
    // c left, then came back: warned again.
    warn_mixed_modes(&cfg, &ring[..1], &mut warned);
    assert_eq!(warn_mixed_modes(&cfg, &ring, &mut warned), ["c"]);
}

/// A member of the ring with no workload: its ring and its run task.
fn join_idle(world: &Arc<World>, id: &str) -> (Ring, JoinHandle<()>) {
    let (ring, _) = ring_of(world, id);
    let run = tokio::spawn({
        let ring = ring.clone();
        async move { ring.run(CancellationToken::new()).await }
    });
    (ring, run)
}

/// A re-verification refused just before the key became this replica's, whose worker had not yet
/// finished with it when the requeue ran (so the key was still being processed), is handed out
/// again: without the record of that refusal the requeue skipped it as covered by the running
/// hand-out, which had only been refused, and the gained key was never re-verified here.
#[tokio::test(start_paused = true)]
async fn a_gained_key_whose_refused_re_verification_is_still_running_is_handed_out_again() {
    use k8s_openapi::api::core::v1::ConfigMap;

    use crate::informer::Store;
    use crate::workqueue::{ItemExponential, WorkQueue};

    let world = Arc::new(World::default());
    let (a, _a_run) = join_idle(&world, "a");
    let (b, b_run) = join_idle(&world, "b");
    settle().await;
    let both = View::new(["a", "b"].map(String::from), VNODES);
    let key = keys()
        .into_iter()
        .find(|k| both.owner(k) == Some("b"))
        .unwrap();
    assert!(a.settled_view().is_some() && b.owns(&key) && !a.owns(&key));

    let mut cm = ConfigMap::default();
    cm.metadata.namespace = key.namespace.clone();
    cm.metadata.name = Some(key.name.clone());
    let store = Store::holding([cm]);
    let queue = WorkQueue::new("web", ItemExponential::default());
    let stop = CancellationToken::new();
    tokio::spawn(crate::shard::requeue_gained(
        a.clone(),
        store,
        queue.clone(),
        |cm: &ConfigMap| Some(ObjectKey::from_object(cm)),
        stop.clone(),
    ));

    // A re-verification of b's key reaches a worker of a, and the gate refuses it.
    queue.add_low_priority(key.clone());
    let handed = queue.get().await.unwrap();
    assert_eq!(handed, key);
    assert!(a.admit_wait(&key, false).await.is_none());

    // Before that worker is done with it, b dies and a takes the key over.
    b_run.abort();
    for _ in 0..100 {
        if a.owns(&key) {
            break;
        }
        sleep(Duration::from_millis(100)).await;
    }
    assert!(a.owns(&key), "a never took over b's key");
    // Let the requeue run after the change.
    sleep(Duration::from_millis(100)).await;
    queue.done(&handed);

    let again = tokio::time::timeout(Duration::from_secs(1), queue.get()).await;
    assert_eq!(
        again.ok().flatten(),
        Some(key),
        "the gained key was not re-verified"
    );
    assert!(a.admit(&handed).is_some());
    stop.cancel();
}
