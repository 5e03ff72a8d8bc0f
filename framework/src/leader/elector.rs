//! The election loop: acquire (retrying with jitter), renew until the deadline passes or shutdown,
//! and release, following client-go's `tryAcquireOrRenew` step by step.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until, timeout, timeout_at};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::LeaderError;
use super::config::{JITTER_FACTOR, LeaderElectionConfig};
use super::record::LeaderRecord;
use super::status::{LeaderMetrics, LeaderState, LeaderStatus};
use super::store::{KubeLeaseStore, LeaseStore};

/// The last lease this replica read or wrote, and when its record last changed (local clock).
struct Observed {
    lease: Lease,
    record: LeaderRecord,
    time: Instant,
}

/// Runs leader election for one identity on one Lease; `run` guards the work passed to it.
pub struct LeaderElector {
    cfg: LeaderElectionConfig,
    store: Arc<dyn LeaseStore>,
    observed: Option<Observed>,
    state: watch::Sender<LeaderState>,
    metrics: LeaderMetrics,
}

impl LeaderElector {
    /// Validates the configuration and prepares an elector on `cfg.lease_namespace/lease_name`.
    pub fn new(client: kube::Client, cfg: LeaderElectionConfig) -> Result<Self, LeaderError> {
        let store = KubeLeaseStore::new(client, &cfg.lease_namespace, &cfg.lease_name);
        Self::with_store(Arc::new(store), cfg)
    }

    pub(crate) fn with_store(
        store: Arc<dyn LeaseStore>,
        cfg: LeaderElectionConfig,
    ) -> Result<Self, LeaderError> {
        cfg.validate()?;
        let (state, _) = watch::channel(LeaderState::default());
        Ok(Self {
            cfg,
            store,
            observed: None,
            state,
            metrics: LeaderMetrics::default(),
        })
    }

    /// Reports leadership through `metrics` (see [`LeaderMetrics::register`]).
    pub fn with_metrics(mut self, metrics: LeaderMetrics) -> Self {
        self.metrics = metrics;
        self.metrics.set_leader(&self.cfg.lease_name, false);
        self
    }

    /// A handle on this elector's state for health checks and tests; take it before `run`.
    pub fn status(&self) -> LeaderStatus {
        LeaderStatus::new(
            self.state.subscribe(),
            self.cfg.lease_duration,
            format!("{}/{}", self.cfg.lease_namespace, self.cfg.lease_name),
        )
    }

    /// Acquires the lease, then runs `on_leading` with a token that is cancelled on shutdown or when
    /// leadership is lost, renewing all the while.
    ///
    /// - `shutdown` before leading: returns `Ok(())` without running `on_leading`.
    /// - `shutdown` while leading: keeps renewing until `on_leading` returns, then releases the lease
    ///   if `release_on_cancel`, and returns `Ok(())`.
    /// - renewal fails for `renew_deadline`: publishes "not leader" (see [`Self::status`]), then
    ///   cancels the token, waits for `on_leading` to return — aborting it if it has not within
    ///   `lease_duration - renew_deadline`, when another replica may lead — and returns
    ///   [`LeaderError::LeadershipLost`]; the caller must stop acting (the binary exits 1, as
    ///   upstream). The work should drop in-flight operations, not drain them, when the token
    ///   fires and the status says it no longer leads.
    /// - `on_leading` returning early does not give up the lease (client-go semantics): the elector
    ///   keeps it until shutdown.
    pub async fn run<F>(
        mut self,
        shutdown: CancellationToken,
        on_leading: F,
    ) -> Result<(), LeaderError>
    where
        F: FnOnce(CancellationToken) -> BoxFuture<'static, ()>,
    {
        if !self.acquire(&shutdown).await {
            return Ok(());
        }
        let leading = shutdown.child_token();
        let mut work = tokio::spawn(on_leading(leading.clone()));
        let mut work_done = false;
        let mut next_renew = Instant::now() + self.cfg.retry_period;
        loop {
            tokio::select! {
                biased;
                joined = &mut work, if !work_done => {
                    work_done = true;
                    if let Err(e) = joined {
                        error!(error = %e, "leader work ended abnormally");
                    }
                }
                _ = shutdown.cancelled(), if work_done => break,
                renewed = async {
                    sleep_until(next_renew).await;
                    self.renew().await
                } => {
                    if !renewed {
                        // "Not leader" is visible before the token fires, so the work can tell
                        // loss (drop everything) from shutdown (drain while we still renew).
                        self.publish_not_leader();
                        leading.cancel();
                        error!(lease = %self.cfg.lease_name, "leaderelection lost");
                        if !work_done {
                            self.stop_work_after_loss(work).await;
                        }
                        return Err(LeaderError::LeadershipLost {
                            namespace: self.cfg.lease_namespace.clone(),
                            name: self.cfg.lease_name.clone(),
                            renew_deadline: self.cfg.renew_deadline,
                        });
                    }
                    next_renew = Instant::now() + self.cfg.retry_period;
                }
            }
        }
        if self.cfg.release_on_cancel {
            self.release().await;
        }
        self.publish_not_leader();
        Ok(())
    }

    /// After a loss, gives the work until another replica can have taken the Lease (lease
    /// duration minus renew deadline: the others judge expiry from their own last sight of our
    /// renewal) to stop, then aborts it, so `run` never returns while the work still acts.
    async fn stop_work_after_loss(&self, mut work: tokio::task::JoinHandle<()>) {
        let margin = self
            .cfg
            .lease_duration
            .saturating_sub(self.cfg.renew_deadline);
        if timeout(margin, &mut work).await.is_err() {
            warn!(
                ?margin,
                "leader work did not stop after leadership was lost; aborting it"
            );
            work.abort();
            let _ = work.await;
        }
    }

    /// Tries until the lease is ours or shutdown; waits `retry_period × [1, 2.2)` between attempts.
    async fn acquire(&mut self, shutdown: &CancellationToken) -> bool {
        info!(lease = %self.cfg.lease_name, identity = %self.cfg.identity, "attempting to acquire leader lease");
        loop {
            let attempt = timeout(self.cfg.renew_deadline, self.try_acquire_or_renew());
            let acquired = tokio::select! {
                _ = shutdown.cancelled() => return false,
                r = attempt => r.unwrap_or(false),
            };
            if acquired {
                info!(lease = %self.cfg.lease_name, identity = %self.cfg.identity, "successfully acquired lease");
                return true;
            }
            let wait = jittered(self.cfg.retry_period);
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                _ = sleep(wait) => {}
            }
        }
    }

    /// One renewal: retries every `retry_period` until it succeeds or `renew_deadline` has passed.
    async fn renew(&mut self) -> bool {
        let deadline = Instant::now() + self.cfg.renew_deadline;
        loop {
            match timeout_at(deadline, self.try_acquire_or_renew()).await {
                Ok(true) => return true,
                Ok(false) => {}
                Err(_) => return false,
            }
            let next = Instant::now() + self.cfg.retry_period;
            if next >= deadline {
                return false;
            }
            sleep_until(next).await;
        }
    }

    fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|o| o.record.holder == self.cfg.identity)
    }

    /// client-go `isLeaseValid`: the observed holder's lease has not run out on *our* clock.
    fn is_lease_valid(&self, now: Instant) -> bool {
        self.observed.as_ref().is_some_and(|o| {
            let secs = u64::try_from(o.record.lease_duration_seconds).unwrap_or(0);
            o.time + Duration::from_secs(secs) > now
        })
    }

    /// client-go `tryAcquireOrRenew`: a fast-path renew with the cached lease, else read, respect an
    /// unexpired foreign holder, and conditionally write our record.
    async fn try_acquire_or_renew(&mut self) -> bool {
        let wall = Timestamp::now();
        let mut desired = LeaderRecord {
            holder: self.cfg.identity.clone(),
            lease_duration_seconds: self.cfg.lease_duration_seconds(),
            acquire_time: Some(wall),
            renew_time: Some(wall),
            transitions: 0,
        };

        // Fast path: we lead and our lease is valid; write over the lease we last saw.
        if self.is_leader()
            && self.is_lease_valid(Instant::now())
            && let Some(obs) = &self.observed
        {
            desired.acquire_time = obs.record.acquire_time;
            desired.transitions = obs.record.transitions;
            let cached = obs.lease.clone();
            match self.store.replace(desired.apply_to(cached)).await {
                Ok(written) => {
                    self.set_observed(written, desired);
                    return true;
                }
                Err(e) => {
                    self.metrics.slowpath(&self.cfg.lease_name);
                    debug!(error = %e, "fast path renew failed, falling back to slow path");
                }
            }
        }

        let current = match self.store.get().await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                return match self
                    .store
                    .create(desired.new_lease(&self.cfg.lease_namespace, &self.cfg.lease_name))
                    .await
                {
                    Ok(created) => {
                        self.set_observed(created, desired);
                        true
                    }
                    Err(e) => {
                        debug!(error = %e, "error initially creating leader election record");
                        false
                    }
                };
            }
            Err(e) => {
                warn!(error = %e, lease = %self.cfg.lease_name, "error retrieving resource lock");
                return false;
            }
        };

        let old = LeaderRecord::from_lease(&current);
        let now = Instant::now();
        match &mut self.observed {
            Some(obs) if obs.record == old => obs.lease = current.clone(),
            previous => {
                if previous
                    .as_ref()
                    .is_none_or(|p| p.record.holder != old.holder)
                    && !old.holder.is_empty()
                {
                    info!(lease = %self.cfg.lease_name, holder = %old.holder, "new leader observed");
                }
                self.observed = Some(Observed {
                    lease: current.clone(),
                    record: old.clone(),
                    time: now,
                });
                self.publish();
            }
        }

        if !old.holder.is_empty() && self.is_lease_valid(now) && !self.is_leader() {
            debug!(holder = %old.holder, "lock is held and has not yet expired");
            return false;
        }

        if self.is_leader() {
            desired.acquire_time = old.acquire_time;
            desired.transitions = old.transitions;
        } else {
            desired.transitions = old.transitions + 1;
        }
        match self.store.replace(desired.apply_to(current)).await {
            Ok(written) => {
                self.set_observed(written, desired);
                true
            }
            Err(e) => {
                debug!(error = %e, "failed to update lock");
                false
            }
        }
    }

    /// Gives the lease up so a standby acquires it on its next retry: re-reads it, and if we still
    /// hold it writes an empty holder with a 1 s duration (client-go's release record). Retries on
    /// conflict; never clears a lease held by someone else.
    async fn release(&mut self) -> bool {
        if !self.is_leader() {
            return true;
        }
        let deadline = self.cfg.renew_deadline;
        let attempt = async {
            for _ in 0..5 {
                let current = match self.store.get().await {
                    Ok(Some(lease)) => lease,
                    Ok(None) => return true,
                    Err(e) => {
                        warn!(error = %e, "failed to read lease for release");
                        return false;
                    }
                };
                let old = LeaderRecord::from_lease(&current);
                if old.holder != self.cfg.identity {
                    return true;
                }
                let now = Timestamp::now();
                let released = LeaderRecord {
                    holder: String::new(),
                    lease_duration_seconds: 1,
                    acquire_time: Some(now),
                    renew_time: Some(now),
                    transitions: old.transitions,
                };
                match self.store.replace(released.apply_to(current)).await {
                    Ok(written) => {
                        self.set_observed(written, released);
                        info!(lease = %self.cfg.lease_name, "released leader lease");
                        return true;
                    }
                    Err(kube::Error::Api(s)) if s.is_conflict() => continue,
                    Err(e) => {
                        warn!(error = %e, "failed to release lease");
                        return false;
                    }
                }
            }
            false
        };
        timeout(deadline, attempt).await.unwrap_or(false)
    }

    fn set_observed(&mut self, lease: Lease, record: LeaderRecord) {
        self.observed = Some(Observed {
            lease,
            record,
            time: Instant::now(),
        });
        self.publish();
    }

    fn publish(&self) {
        let leader = self.is_leader();
        let holder = self
            .observed
            .as_ref()
            .map(|o| o.record.holder.clone())
            .filter(|h| !h.is_empty());
        let observed_at = self.observed.as_ref().map(|o| o.time);
        self.state.send_modify(|s| {
            if leader {
                s.last_renew = observed_at;
            }
            s.is_leader = leader;
            s.holder = holder;
        });
        self.metrics.set_leader(&self.cfg.lease_name, leader);
    }

    fn publish_not_leader(&self) {
        self.state.send_modify(|s| s.is_leader = false);
        self.metrics.set_leader(&self.cfg.lease_name, false);
    }
}

/// `wait.Jitter(d, 1.2)`: `d + rand[0,1) × 1.2 × d`, so replicas do not retry in lockstep.
fn jittered(d: Duration) -> Duration {
    d + d.mul_f64(rand::random::<f64>() * JITTER_FACTOR)
}

#[cfg(test)]
#[path = "elector_tests.rs"]
mod tests;
