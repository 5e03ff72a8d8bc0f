//! The admission gate and the drain/ack handover: a member admits a key only if it owns it under
//! every view in its chain, publishes a view only after draining what it loses, and settles a view
//! (takes what it gains) only once every live member has published it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use tokio::sync::{Notify, watch};
use tokio::time::{Instant, sleep_until, timeout_at};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::label::{ShardAssignment, ShardLabel};
use super::membership::{KubeRingStore, Membership, Peer, RingStore, lease_name};
use super::metrics::RingMetrics;
use super::missed::Missed;
use super::presence::Presence;
use super::ring::{DEFAULT_VNODES, View};
use crate::informer::ObjectKey;
use crate::leader::{LeaderElectionConfig, LeaderError};

/// A chain longer than this (membership churning faster than it settles) is cut: nothing is
/// admissible until the next settle.
const MAX_CHAIN: usize = 8;

/// One sharded controller's ring as this replica takes part in it.
#[derive(Clone, Debug)]
pub struct RingConfig {
    /// The ring's name (one per sharded controller); prefixes the Lease names and labels them.
    pub ring: String,
    /// Namespace, identity and durations; `lease_name` is ignored (each member has its own).
    pub lease: LeaderElectionConfig,
    /// Virtual nodes per member; every member of a ring must use the same number.
    pub vnodes: u32,
    /// Whether the assignment is only hashed or also recorded on the objects as a label; every
    /// member of a ring must use the same.
    pub assignment: ShardAssignment,
}

impl RingConfig {
    /// A ring with kube-controller-manager's lease durations and [`DEFAULT_VNODES`].
    pub fn new(ring: &str, namespace: &str, identity: &str) -> Self {
        Self {
            ring: ring.to_string(),
            lease: LeaderElectionConfig::new(namespace, ring, identity),
            vnodes: DEFAULT_VNODES,
            assignment: ShardAssignment::Hash,
        }
    }
}

/// What the gate knows: the chain of views, the keys in flight, the last renewal.
struct Gate {
    chain: Vec<View>,
    /// Nothing is admissible (joining, after lost membership, chain cut, shutting down).
    blocked: bool,
    stopping: bool,
    in_flight: HashMap<ObjectKey, CancellationToken>,
    /// When the last successful Lease write was *sent*.
    last_renew: Option<Instant>,
    /// When the current unsettled change was first seen.
    change_since: Option<Instant>,
    /// Bumped, under the lock, by every change of what is admissible, so an [`Ownership`] taken
    /// after two changes knows it may have missed a state in between.
    generation: u64,
}

impl Gate {
    fn admissible(&self, me: &str, key: &ObjectKey) -> bool {
        !self.blocked
            && !self.stopping
            && !self.chain.is_empty()
            && self.chain.iter().all(|v| v.owner(key) == Some(me))
    }

    fn drained(&self, me: &str) -> bool {
        self.in_flight.keys().all(|k| self.admissible(me, k))
    }
}

struct Shared {
    cfg: RingConfig,
    store: Arc<dyn RingStore>,
    gate: Mutex<Gate>,
    drained: Notify,
    changes: watch::Sender<u64>,
    metrics: RingMetrics,
    /// Label mode: whether an admitted key is cached here or gone (set once the primary kind's
    /// informer exists).
    presence: OnceLock<Presence>,
    /// Keys refused while not this replica's (see `missed.rs`).
    missed: Missed,
}

/// A replica's handle on one ring: [`Ring::run`] keeps the membership, [`Ring::admit`] gates each
/// reconcile. Cheap to clone.
#[derive(Clone)]
pub struct Ring {
    shared: Arc<Shared>,
}

/// One admitted reconcile of a key; dropping it ends the reconcile for the handover.
pub struct Admitted {
    shared: Arc<Shared>,
    key: ObjectKey,
    token: CancellationToken,
}

impl Admitted {
    /// Fires when this replica lost its membership: drop the reconcile at once.
    pub fn lost(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.shared.gate.lock().in_flight.remove(&self.key);
        self.shared.drained.notify_waiters();
    }
}

/// A frozen copy of which keys a replica could admit (see [`Ring::ownership`]).
#[derive(Clone, Debug, Default)]
pub struct Ownership {
    me: String,
    chain: Vec<View>,
    generation: u64,
}

impl Ownership {
    /// Whether `key` was admissible here when this was taken (in-flight state aside).
    pub fn admits(&self, key: &ObjectKey) -> bool {
        !self.chain.is_empty() && self.chain.iter().all(|v| v.owner(key) == Some(&*self.me))
    }

    /// Whether `key` may have been refused since `before` was taken and is admissible now: it
    /// was not admissible then, or a state between the two (which `before` cannot show) may have
    /// refused it.
    pub fn gained_since(&self, before: &Ownership, key: &ObjectKey) -> bool {
        self.admits(key) && (self.generation > before.generation + 1 || !before.admits(key))
    }
}

impl Ring {
    /// Validates `cfg` and prepares this replica's membership of the ring over the API.
    pub fn new(client: kube::Client, cfg: RingConfig) -> Result<Self, LeaderError> {
        let name = lease_name(&cfg.ring, &cfg.lease.identity);
        let store = KubeRingStore::new(client, &cfg.lease.lease_namespace, &cfg.ring, &name);
        Self::with_store(Arc::new(store), cfg)
    }

    pub(crate) fn with_store(
        store: Arc<dyn RingStore>,
        cfg: RingConfig,
    ) -> Result<Self, LeaderError> {
        cfg.lease.validate()?;
        let (changes, _) = watch::channel(0);
        let missed = Missed::new(cfg.lease.lease_duration * 2);
        Ok(Self {
            shared: Arc::new(Shared {
                cfg,
                store,
                gate: Mutex::new(Gate {
                    chain: Vec::new(),
                    blocked: true,
                    stopping: false,
                    in_flight: HashMap::new(),
                    last_renew: None,
                    change_since: None,
                    generation: 0,
                }),
                drained: Notify::new(),
                changes,
                metrics: RingMetrics::default(),
                presence: OnceLock::new(),
                missed,
            }),
        })
    }

    /// Reports through `metrics` (see [`RingMetrics::register`]); call before `run`.
    pub fn with_metrics(mut self, metrics: RingMetrics) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.metrics = metrics;
        }
        self
    }

    fn me(&self) -> &str {
        &self.shared.cfg.lease.identity
    }

    /// Admits a reconcile of `key` if this replica may reconcile it now, registering it as in
    /// flight until the returned guard drops. `None`: drop the key (it is re-enqueued through
    /// [`Ring::changes`] when it becomes this replica's), or it is already in flight here.
    pub fn admit(&self, key: &ObjectKey) -> Option<Admitted> {
        self.try_admit(key, None)
    }

    /// [`Ring::admit`]; with `refusal` (whether the hand-out carried an event), a key refused
    /// because it is not this replica's now is recorded as missed, under the same lock as any
    /// change of ownership, so the requeue after a change that gains it sees the refusal if it
    /// came first (see `missed.rs`).
    fn try_admit(&self, key: &ObjectKey, refusal: Option<bool>) -> Option<Admitted> {
        let mut gate = self.shared.gate.lock();
        let renewed = gate
            .last_renew
            .is_some_and(|t| t + self.shared.cfg.lease.renew_deadline > Instant::now());
        if !renewed || !gate.admissible(self.me(), key) {
            if let Some(fresh) = refusal {
                self.shared.missed.note(key, fresh);
            }
            return None;
        }
        if gate.in_flight.contains_key(key) {
            return None;
        }
        let token = CancellationToken::new();
        gate.in_flight.insert(key.clone(), token.clone());
        Some(Admitted {
            shared: self.shared.clone(),
            key: key.clone(),
            token,
        })
    }

    /// Admits `key` as [`Ring::admit`] does, but while the key is this replica's and in flight
    /// here already (another lane of the same controller), waits for that reconcile to end
    /// instead of refusing. `None` once the key is not this replica's, and that refusal is
    /// recorded as missed, with `fresh`: the hand-out carried an event, not only a
    /// re-verification.
    pub async fn admit_wait(&self, key: &ObjectKey, fresh: bool) -> Option<Admitted> {
        loop {
            // Registered before the check, so a drop between the check and the wait is seen.
            let dropped = self.shared.drained.notified();
            tokio::pin!(dropped);
            dropped.as_mut().enable();
            if let Some(admitted) = self.try_admit(key, Some(fresh)) {
                return Some(admitted);
            }
            let busy_here = {
                let gate = self.shared.gate.lock();
                gate.admissible(self.me(), key) && gate.in_flight.contains_key(key)
            };
            if !busy_here {
                return None;
            }
            dropped.await;
        }
    }

    /// Whether `key` is this replica's now (for re-enqueueing after [`Ring::changes`] ticks).
    pub fn owns(&self, key: &ObjectKey) -> bool {
        self.shared.gate.lock().admissible(self.me(), key)
    }

    /// What this replica may reconcile now, frozen: compare two to find the keys it gained.
    pub fn ownership(&self) -> Ownership {
        let gate = self.shared.gate.lock();
        let open = !gate.blocked && !gate.stopping;
        Ownership {
            me: self.me().to_string(),
            chain: if open { gate.chain.clone() } else { Vec::new() },
            generation: gate.generation,
        }
    }

    /// The ring's name.
    pub fn name(&self) -> &str {
        &self.shared.cfg.ring
    }

    /// This member's assignment label when the ring runs in label mode, else `None`.
    pub fn label(&self) -> Option<ShardLabel> {
        (self.shared.cfg.assignment == ShardAssignment::Label)
            .then(|| ShardLabel::new(&self.shared.cfg.ring, self.me()))
    }

    /// The view every live member has acknowledged, while this member is in it and admitting;
    /// `None` while a change is being handed over.
    pub fn settled_view(&self) -> Option<View> {
        let gate = self.shared.gate.lock();
        match gate.chain.as_slice() {
            [view] if !gate.blocked && !gate.stopping => Some(view.clone()),
            _ => None,
        }
    }

    pub(crate) fn metrics(&self) -> &RingMetrics {
        &self.shared.metrics
    }

    /// The retry period the ring renews at, for loops that follow it.
    pub(crate) fn retry_period(&self) -> std::time::Duration {
        self.shared.cfg.lease.retry_period
    }

    /// Label mode: tells the gate how to tell a key absent from the cache from a deleted one.
    /// The first call wins; whether this was it.
    pub(crate) fn set_presence(&self, presence: Presence) -> bool {
        self.shared.presence.set(presence).is_ok()
    }

    pub(crate) fn presence(&self) -> Option<&Presence> {
        self.shared.presence.get()
    }

    /// The keys refused lately, each with whether a refusal carried an event (see `missed.rs`).
    pub(crate) fn recently_missed(&self) -> HashMap<ObjectKey, bool> {
        self.shared.missed.recent()
    }

    /// This member's identity in the ring.
    pub fn identity(&self) -> &str {
        self.me()
    }

    /// Ticks whenever the set of keys this replica may reconcile changes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// A health check: fails while the Lease has not been renewed within the renew deadline.
    pub fn health_check(&self) -> impl Fn() -> Result<(), String> + Send + Sync + 'static {
        let shared = self.shared.clone();
        move || {
            let gate = shared.gate.lock();
            match gate.last_renew {
                Some(t) if t + shared.cfg.lease.renew_deadline > Instant::now() => Ok(()),
                _ => Err(format!(
                    "shard ring {}: lease not renewed within {:?}",
                    shared.cfg.ring, shared.cfg.lease.renew_deadline
                )),
            }
        }
    }

    fn changed(&self) {
        self.shared.changes.send_modify(|g| *g += 1);
    }

    /// Keeps this replica's membership until `stop`: renews its Lease every retry period, follows
    /// the live set, hands keys over, and on `stop` stops admitting, waits for in-flight
    /// reconciles while still renewing, then deletes its Lease. Returns once the Lease is gone
    /// (or could not be deleted; it then expires).
    pub async fn run(&self, stop: CancellationToken) {
        let cfg = &self.shared.cfg;
        let mut membership = Membership::new(
            self.shared.store.clone(),
            &cfg.ring,
            &cfg.lease.lease_namespace,
            &cfg.lease.identity,
            cfg.lease.lease_duration_seconds(),
            cfg.assignment.as_str(),
        );
        let mut published: Option<View> = None;
        // Peers already warned about for another assignment mode.
        let mut mismatched = HashSet::new();
        loop {
            if stop.is_cancelled() {
                let idle = {
                    let mut gate = self.shared.gate.lock();
                    gate.stopping = true;
                    gate.generation += 1;
                    gate.in_flight.is_empty()
                };
                self.changed();
                if idle {
                    break;
                }
            }
            let next = Instant::now() + cfg.lease.retry_period;
            let deadline = self
                .shared
                .gate
                .lock()
                .last_renew
                .map(|t| t + cfg.lease.renew_deadline);
            let sent = Instant::now();
            let limit = match deadline {
                Some(d) if d > sent => d.min(next),
                _ => next,
            };
            let view_id = published.as_ref().map(View::id);
            match timeout_at(limit, membership.renew(view_id.as_deref())).await {
                Ok(Ok(())) => self.shared.gate.lock().last_renew = Some(sent),
                Ok(Err(e)) => warn!(ring = %cfg.ring, error = %e, "failed to renew shard lease"),
                Err(_) => warn!(ring = %cfg.ring, "shard lease renewal timed out"),
            }
            if self.check_lost() {
                published = None;
            }
            if !stop.is_cancelled() {
                match timeout_at(next.max(Instant::now()), membership.live_peers()).await {
                    Ok(Ok(peers)) => {
                        warn_mixed_modes(cfg, &peers, &mut mismatched);
                        self.step(&peers, &mut published)
                    }
                    Ok(Err(e)) => {
                        warn!(ring = %cfg.ring, error = %e, "failed to list shard leases")
                    }
                    Err(_) => {}
                }
            }
            let deadline = self
                .shared
                .gate
                .lock()
                .last_renew
                .map(|t| t + cfg.lease.renew_deadline)
                .filter(|d| *d > Instant::now());
            tokio::select! {
                _ = sleep_until(next) => {}
                _ = sleep_until(deadline.unwrap_or(next)) => {}
                _ = stop.cancelled(), if !stop.is_cancelled() => {}
                _ = self.shared.drained.notified(), if stop.is_cancelled() => {}
            }
            self.check_lost();
        }
        if let Err(e) = membership.delete().await {
            warn!(ring = %cfg.ring, error = %e, "failed to delete shard lease; it will expire");
        }
        info!(ring = %cfg.ring, "left shard ring");
    }

    /// Lost membership (not renewed within the renew deadline): admit nothing, cancel every
    /// in-flight reconcile, forget the chain. Returns whether it was lost.
    fn check_lost(&self) -> bool {
        let cfg = &self.shared.cfg;
        let mut gate = self.shared.gate.lock();
        let lost = gate
            .last_renew
            .is_some_and(|t| t + cfg.lease.renew_deadline <= Instant::now());
        if lost && !gate.chain.is_empty() {
            warn!(ring = %cfg.ring, "shard lease not renewed within the renew deadline; dropping all keys");
            gate.chain.clear();
            gate.blocked = true;
            gate.generation += 1;
            for token in gate.in_flight.values() {
                token.cancel();
            }
            drop(gate);
            self.shared.metrics.unsettled(&cfg.ring);
            self.changed();
        }
        lost
    }

    /// One protocol step over a fresh list: restrict to a new live set, publish once drained,
    /// settle once every live peer has published the same view.
    fn step(&self, peers: &[super::membership::Peer], published: &mut Option<View>) {
        let cfg = &self.shared.cfg;
        let me = self.me().to_string();
        let mut gate = self.shared.gate.lock();
        if gate
            .last_renew
            .is_none_or(|t| t + cfg.lease.renew_deadline <= Instant::now())
        {
            return;
        }
        let target = View::new(
            peers.iter().map(|p| p.identity.clone()).chain([me.clone()]),
            cfg.vnodes,
        );
        let mut changed = false;
        if gate.chain.last() != Some(&target) {
            gate.chain.push(target.clone());
            if gate.chain.len() > MAX_CHAIN {
                gate.chain = vec![target.clone()];
                gate.blocked = true;
            }
            gate.change_since.get_or_insert_with(Instant::now);
            gate.generation += 1;
            changed = true;
        }
        if published.as_ref() != Some(&target) && gate.drained(&me) {
            // Written with the next renewal; acks are only counted once that write succeeded.
            *published = Some(target);
        } else if let Some(view) = published.as_ref().filter(|v| gate.chain.last() == Some(v)) {
            let id = view.id();
            let settled = gate.chain.len() == 1 && !gate.blocked;
            if !settled && peers.iter().all(|p| p.view.as_deref() == Some(id.as_str())) {
                gate.chain = vec![view.clone()];
                gate.blocked = false;
                let took = gate
                    .change_since
                    .take()
                    .map_or(0.0, |t| t.elapsed().as_secs_f64());
                self.shared.metrics.settled(
                    &cfg.ring,
                    view.members().len(),
                    view.owned_fraction(&me),
                    took,
                );
                info!(ring = %cfg.ring, members = view.members().len(), "shard view settled");
                gate.generation += 1;
                changed = true;
            }
        }
        drop(gate);
        if changed {
            self.changed();
        }
    }
}

/// Warns once per peer that publishes another assignment mode than this member's. The ring still
/// runs: ownership is the same in both modes, so no key is reconciled twice; but an object a
/// label-mode member moved to a hash-mode one is not moved on, and may wait uncached until the
/// hash-mode member leaves (a rolling switch of `--shard-assignment` passes through this).
/// Returns the peers warned about this time.
fn warn_mixed_modes(cfg: &RingConfig, peers: &[Peer], warned: &mut HashSet<String>) -> Vec<String> {
    let mine = cfg.assignment.as_str();
    let mut now = Vec::new();
    for peer in peers {
        if let Some(theirs) = peer.assignment.as_deref()
            && theirs != mine
            && warned.insert(peer.identity.clone())
        {
            warn!(
                ring = %cfg.ring,
                peer = %peer.identity,
                theirs,
                mine,
                "a shard ring member uses another --shard-assignment; every replica must use the same (objects moved to a hash-mode member may stay uncached until it leaves)"
            );
            now.push(peer.identity.clone());
        }
    }
    warned.retain(|id| peers.iter().any(|p| &p.identity == id));
    now
}

#[cfg(test)]
#[path = "handover_tests.rs"]
mod tests;
