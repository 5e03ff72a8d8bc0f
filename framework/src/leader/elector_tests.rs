//! client-go `TestTryAcquireOrRenewLeases`-style tests: injected lease states, a fake store with
//! optimistic concurrency, and tokio's paused clock for expiry.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use futures::FutureExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::core::Status;
use parking_lot::Mutex;

use super::*;

/// An in-memory Lease with resourceVersion checks, call counters and failure injection.
#[derive(Default)]
struct FakeStore {
    lease: Mutex<Option<Lease>>,
    rv: AtomicUsize,
    gets: AtomicUsize,
    writes: AtomicUsize,
    fail_all: AtomicBool,
    /// The next replace finds the lease rewritten by "rival" after our GET.
    rival_before_replace: AtomicBool,
}

fn api_error(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(Status::failure(reason, reason).with_code(code).boxed())
}

impl FakeStore {
    fn with(record: LeaderRecord) -> Arc<Self> {
        let store = Arc::new(Self::default());
        store.put(record);
        store
    }

    /// Another process writes the lease (bumps the resourceVersion).
    fn put(&self, record: LeaderRecord) {
        self.write(
            &mut self.lease.lock(),
            record.new_lease("kube-system", "ccm"),
        );
    }

    /// Stores `lease` in `slot` under the next resourceVersion, as the API server does.
    fn write(&self, slot: &mut Option<Lease>, mut lease: Lease) -> Lease {
        let rv = self.rv.fetch_add(1, Ordering::SeqCst) + 1;
        lease.metadata.resource_version = Some(rv.to_string());
        *slot = Some(lease.clone());
        lease
    }

    fn record(&self) -> LeaderRecord {
        LeaderRecord::from_lease(self.lease.lock().as_ref().unwrap())
    }
}

impl LeaseStore for FakeStore {
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, kube::Error>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        let result = if self.fail_all.load(Ordering::SeqCst) {
            Err(api_error(500, "InternalError"))
        } else {
            Ok(self.lease.lock().clone())
        };
        async move { result }.boxed()
    }

    fn create(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, kube::Error>> {
        let mut slot = self.lease.lock();
        let result = if slot.is_some() {
            Err(api_error(409, "AlreadyExists"))
        } else {
            Ok(self.write(&mut slot, lease))
        };
        async move { result }.boxed()
    }

    fn replace(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, kube::Error>> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        if self.rival_before_replace.swap(false, Ordering::SeqCst) {
            self.put(held_by("rival", 9));
        }
        let mut slot = self.lease.lock();
        let current_rv = slot
            .as_ref()
            .and_then(|l| l.metadata.resource_version.clone());
        let result = if self.fail_all.load(Ordering::SeqCst) {
            Err(api_error(500, "InternalError"))
        } else if current_rv != lease.metadata.resource_version {
            Err(api_error(409, "Conflict"))
        } else {
            Ok(self.write(&mut slot, lease))
        };
        async move { result }.boxed()
    }
}

fn cfg(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new("kube-system", "ccm", identity)
}

fn held_by(holder: &str, transitions: i32) -> LeaderRecord {
    let t = Timestamp::from_second(1_000_000).unwrap();
    LeaderRecord {
        holder: holder.into(),
        lease_duration_seconds: 15,
        acquire_time: Some(t),
        renew_time: Some(t),
        transitions,
    }
}

fn elector(store: &Arc<FakeStore>, identity: &str) -> LeaderElector {
    LeaderElector::with_store(store.clone(), cfg(identity)).unwrap()
}

#[tokio::test(start_paused = true)]
async fn creates_missing_lease_and_leads() {
    let store = Arc::new(FakeStore::default());
    let mut le = elector(&store, "me");
    assert!(le.try_acquire_or_renew().await);
    let rec = store.record();
    assert_eq!(rec.holder, "me");
    assert_eq!(rec.lease_duration_seconds, 15);
    assert_eq!(rec.transitions, 0);
    assert!(le.status().is_leader());
}

#[tokio::test(start_paused = true)]
async fn fresh_foreign_lease_is_respected_until_it_expires_on_our_clock() {
    let store = FakeStore::with(held_by("other", 4));
    let mut le = elector(&store, "me");
    assert!(!le.try_acquire_or_renew().await, "freshly observed holder");
    assert_eq!(le.status().current().holder.as_deref(), Some("other"));

    tokio::time::advance(Duration::from_secs(14)).await;
    assert!(
        !le.try_acquire_or_renew().await,
        "still within lease duration"
    );

    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(
        le.try_acquire_or_renew().await,
        "expired after 15 s unchanged"
    );
    let rec = store.record();
    assert_eq!(rec.holder, "me");
    assert_eq!(rec.transitions, 5, "a takeover counts a transition");
}

#[tokio::test(start_paused = true)]
async fn a_renewing_holder_restarts_the_expiry_clock() {
    let store = FakeStore::with(held_by("other", 0));
    let mut le = elector(&store, "me");
    assert!(!le.try_acquire_or_renew().await);
    tokio::time::advance(Duration::from_secs(10)).await;
    let mut renewed = held_by("other", 0);
    renewed.renew_time = Some(Timestamp::from_second(1_000_010).unwrap());
    store.put(renewed);
    assert!(!le.try_acquire_or_renew().await);
    tokio::time::advance(Duration::from_secs(10)).await;
    assert!(
        !le.try_acquire_or_renew().await,
        "20 s since first seen but only 10 s since the record changed"
    );
}

#[tokio::test(start_paused = true)]
async fn released_lease_is_taken_at_once() {
    let mut released = held_by("", 2);
    released.lease_duration_seconds = 1;
    let store = FakeStore::with(released);
    let mut le = elector(&store, "me");
    assert!(le.try_acquire_or_renew().await);
    assert_eq!(store.record().transitions, 3);
}

#[tokio::test(start_paused = true)]
async fn renewal_keeps_acquire_time_and_transitions_and_uses_the_fast_path() {
    let store = FakeStore::with(held_by("me", 7));
    let mut le = elector(&store, "me");
    assert!(le.try_acquire_or_renew().await);
    let acquired = store.record();
    assert_eq!(acquired.transitions, 7, "we already held it: no transition");
    assert_eq!(acquired.acquire_time, held_by("me", 7).acquire_time);
    let gets = store.gets.load(Ordering::SeqCst);

    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(le.try_acquire_or_renew().await);
    assert_eq!(store.gets.load(Ordering::SeqCst), gets, "fast path: no GET");
    assert_eq!(store.record().acquire_time, acquired.acquire_time);
}

#[tokio::test(start_paused = true)]
async fn a_rival_writing_between_our_read_and_write_wins() {
    let store = FakeStore::with(held_by("other", 0));
    let mut le = elector(&store, "me");
    assert!(!le.try_acquire_or_renew().await);
    tokio::time::advance(Duration::from_secs(16)).await;
    store.rival_before_replace.store(true, Ordering::SeqCst);
    assert!(!le.try_acquire_or_renew().await, "409 on replace");
    assert_eq!(store.record().holder, "rival");
    assert!(!le.status().is_leader());
    // The rival's record is new to us, so its lease runs from now on our clock.
    tokio::time::advance(Duration::from_secs(14)).await;
    assert!(!le.try_acquire_or_renew().await);
}

#[tokio::test(start_paused = true)]
async fn conflict_on_replace_returns_false() {
    let store = FakeStore::with(held_by("me", 0));
    let mut le = elector(&store, "me");
    assert!(le.try_acquire_or_renew().await);
    // Someone rewrites our lease with a new resourceVersion but the same record.
    store.put(store.record());
    let writes = store.writes.load(Ordering::SeqCst);
    // Fast path conflicts (stale rv), slow path re-reads and succeeds.
    assert!(le.try_acquire_or_renew().await);
    assert_eq!(store.writes.load(Ordering::SeqCst), writes + 2);
}

#[tokio::test(start_paused = true)]
async fn run_releases_after_the_work_finished_on_shutdown() {
    let store = Arc::new(FakeStore::default());
    let le = elector(&store, "me");
    let status = le.status();
    let shutdown = CancellationToken::new();
    let finished = Arc::new(AtomicBool::new(false));
    let seen = finished.clone();
    let store_in_work = store.clone();
    let task = tokio::spawn(le.run(shutdown.clone(), move |token| {
        async move {
            token.cancelled().await;
            // Draining: the lease must still be ours while the work runs.
            tokio::time::sleep(Duration::from_secs(30)).await;
            assert_eq!(store_in_work.record().holder, "me");
            seen.store(true, Ordering::SeqCst);
        }
        .boxed()
    }));
    status.wait_for(|s| s.is_leader).await.unwrap();
    shutdown.cancel();
    task.await.unwrap().unwrap();
    assert!(
        finished.load(Ordering::SeqCst),
        "work finished before release"
    );
    let rec = store.record();
    assert_eq!(rec.holder, "", "released");
    assert_eq!(rec.lease_duration_seconds, 1);
    assert!(!status.is_leader());
}

#[tokio::test(start_paused = true)]
async fn run_without_release_leaves_the_lease_to_expire() {
    let store = Arc::new(FakeStore::default());
    let mut config = cfg("me");
    config.release_on_cancel = false;
    let le = LeaderElector::with_store(store.clone(), config).unwrap();
    let status = le.status();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(le.run(shutdown.clone(), |t| {
        async move { t.cancelled().await }.boxed()
    }));
    status.wait_for(|s| s.is_leader).await.unwrap();
    shutdown.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(store.record().holder, "me");
}

#[tokio::test(start_paused = true)]
async fn run_reports_loss_after_the_renew_deadline_and_cancels_the_work() {
    let store = Arc::new(FakeStore::default());
    let le = elector(&store, "me");
    let status = le.status();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(le.run(CancellationToken::new(), move |token| {
        async move {
            token.cancelled().await;
            let _ = tx.send(tokio::time::Instant::now());
        }
        .boxed()
    }));
    status.wait_for(|s| s.is_leader).await.unwrap();
    let broken_at = tokio::time::Instant::now();
    store.fail_all.store(true, Ordering::SeqCst);
    let result = task.await.unwrap();
    assert!(
        matches!(result, Err(LeaderError::LeadershipLost { .. })),
        "{result:?}"
    );
    let cancelled_at = rx.await.unwrap();
    let after = cancelled_at - broken_at;
    // Next renewal starts within one retry period, then fails for the 10 s renew deadline.
    assert!(after >= Duration::from_secs(10), "{after:?}");
    assert!(after <= Duration::from_secs(12), "{after:?}");
    assert!(!status.is_leader());
}

#[tokio::test(start_paused = true)]
async fn on_loss_run_returns_only_after_the_work_stopped_and_aborts_work_that_does_not() {
    for ignores_the_token in [false, true] {
        let store = Arc::new(FakeStore::default());
        let le = elector(&store, "me");
        let status = le.status();
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = dropped.clone();
        struct SetOnDrop(Arc<AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let status_in_work = status.clone();
        let saw_not_leader = Arc::new(AtomicBool::new(false));
        let saw = saw_not_leader.clone();
        let task = tokio::spawn(le.run(CancellationToken::new(), move |token| {
            async move {
                let _guard = SetOnDrop(flag);
                token.cancelled().await;
                saw.store(!status_in_work.is_leader(), Ordering::SeqCst);
                if ignores_the_token {
                    std::future::pending::<()>().await;
                }
                // A work that stops takes a moment to drop what it was doing.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            .boxed()
        }));
        status.wait_for(|s| s.is_leader).await.unwrap();
        store.fail_all.store(true, Ordering::SeqCst);
        let result = task.await.unwrap();
        assert!(
            matches!(result, Err(LeaderError::LeadershipLost { .. })),
            "{result:?}"
        );
        assert!(
            dropped.load(Ordering::SeqCst),
            "run returned while the work (ignores token: {ignores_the_token}) was still alive"
        );
        assert!(
            saw_not_leader.load(Ordering::SeqCst),
            "loss must be visible to the work when its token fires"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_before_acquiring_returns_without_running_the_work() {
    let store = FakeStore::with(held_by("other", 0));
    let le = elector(&store, "me");
    let shutdown = CancellationToken::new();
    let ran = Arc::new(AtomicBool::new(false));
    let ran2 = ran.clone();
    let task = tokio::spawn(le.run(shutdown.clone(), move |_| {
        ran2.store(true, Ordering::SeqCst);
        async {}.boxed()
    }));
    tokio::time::sleep(Duration::from_secs(5)).await;
    shutdown.cancel();
    task.await.unwrap().unwrap();
    assert!(!ran.load(Ordering::SeqCst));
    assert_eq!(
        store.record().holder,
        "other",
        "never touched the foreign lease"
    );
}

#[tokio::test(start_paused = true)]
async fn release_never_clears_a_foreign_holder() {
    let store = FakeStore::with(held_by("me", 0));
    let mut le = elector(&store, "me");
    assert!(le.try_acquire_or_renew().await);
    store.put(held_by("other", 1));
    assert!(le.release().await);
    assert_eq!(store.record().holder, "other");
}

#[test]
fn jitter_stays_within_client_go_bounds() {
    let d = Duration::from_secs(2);
    for _ in 0..1000 {
        let j = jittered(d);
        assert!(j >= d && j < d.mul_f64(2.2), "{j:?}");
    }
}

#[test]
fn micro_time_is_written() {
    let rec = held_by("me", 0);
    let lease = rec.new_lease("ns", "n");
    let spec = lease.spec.unwrap();
    assert_eq!(spec.renew_time, rec.renew_time.map(MicroTime));
}

/// One replica's view of the shared fake store, which can be cut off from it.
struct Partitionable {
    inner: Arc<FakeStore>,
    cut: AtomicBool,
}

impl Partitionable {
    fn new(inner: &Arc<FakeStore>) -> Arc<Self> {
        Arc::new(Self {
            inner: inner.clone(),
            cut: AtomicBool::new(false),
        })
    }

    fn check(&self) -> Result<(), kube::Error> {
        if self.cut.load(Ordering::SeqCst) {
            Err(kube::Error::Service("connection refused".into()))
        } else {
            Ok(())
        }
    }
}

impl LeaseStore for Partitionable {
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, kube::Error>> {
        match self.check() {
            Ok(()) => self.inner.get(),
            Err(e) => async move { Err(e) }.boxed(),
        }
    }
    fn create(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, kube::Error>> {
        match self.check() {
            Ok(()) => self.inner.create(lease),
            Err(e) => async move { Err(e) }.boxed(),
        }
    }
    fn replace(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, kube::Error>> {
        match self.check() {
            Ok(()) => self.inner.replace(lease),
            Err(e) => async move { Err(e) }.boxed(),
        }
    }
}

/// The safety argument of client-go's design: `renew_deadline < lease_duration` makes a leader that
/// cannot reach the API server stop acting before any standby may take over.
#[tokio::test(start_paused = true)]
async fn a_partitioned_leader_steps_down_before_a_standby_takes_over() {
    let store = Arc::new(FakeStore::default());
    let view_a = Partitionable::new(&store);
    let view_b = Partitionable::new(&store);
    let a = LeaderElector::with_store(view_a.clone(), cfg("a")).unwrap();
    let status_a = a.status();
    let (a_stopped_tx, a_stopped) = tokio::sync::oneshot::channel();
    let task_a = tokio::spawn(a.run(CancellationToken::new(), move |token| {
        async move {
            token.cancelled().await;
            let _ = a_stopped_tx.send(Instant::now());
        }
        .boxed()
    }));
    status_a.wait_for(|s| s.is_leader).await.unwrap();

    let b = LeaderElector::with_store(view_b.clone(), cfg("b")).unwrap();
    let status_b = b.status();
    let shutdown_b = CancellationToken::new();
    let task_b = tokio::spawn(b.run(shutdown_b.clone(), |t| {
        async move { t.cancelled().await }.boxed()
    }));
    // B sees A holding the lease.
    status_b
        .wait_for(|s| s.holder.as_deref() == Some("a"))
        .await
        .unwrap();

    let cut_at = Instant::now();
    view_a.cut.store(true, Ordering::SeqCst);
    status_b.wait_for(|s| s.is_leader).await.unwrap();
    let b_leads_at = Instant::now();

    let a_stopped_at = a_stopped.await.unwrap();
    assert!(matches!(
        task_a.await.unwrap(),
        Err(LeaderError::LeadershipLost { .. })
    ));
    assert!(
        a_stopped_at < b_leads_at,
        "A acted until {:?}, B led from {:?} after the cut",
        a_stopped_at - cut_at,
        b_leads_at - cut_at
    );
    assert!(
        b_leads_at - cut_at >= Duration::from_secs(13),
        "B respected A's 15 s lease"
    );
    shutdown_b.cancel();
    task_b.await.unwrap().unwrap();
}
