//! What the rest of the process sees of leader election: a cheap shared snapshot, the `/healthz`
//! watchdog (`leaderElection`) and the `leader_election_master_status` gauge.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::metrics::registered;

/// Slack past the lease duration before the health check fails, as upstream's
/// `NewLeaderHealthzAdaptor(20 * time.Second)`: a leader that stopped renewing is restarted by the
/// kubelet instead of silently holding a dead lease.
pub const HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

/// One observation of the lease, as this replica last saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderState {
    /// This replica holds the lease.
    pub is_leader: bool,
    /// The holder identity last observed (`None` before the first read or when unheld).
    pub holder: Option<String>,
    /// When this replica last wrote the lease successfully as leader (local monotonic clock).
    pub last_renew: Option<Instant>,
}

/// A cloneable view of an elector's state, obtained before `run` consumes the elector, so health
/// checks, metrics and tests can follow leadership.
#[derive(Clone, Debug)]
pub struct LeaderStatus {
    rx: watch::Receiver<LeaderState>,
    lease_duration: Duration,
    lease: String,
}

impl LeaderStatus {
    pub(crate) fn new(
        rx: watch::Receiver<LeaderState>,
        lease_duration: Duration,
        lease: String,
    ) -> Self {
        Self {
            rx,
            lease_duration,
            lease,
        }
    }

    /// The current state.
    pub fn current(&self) -> LeaderState {
        self.rx.borrow().clone()
    }

    /// Whether this replica currently leads.
    pub fn is_leader(&self) -> bool {
        self.rx.borrow().is_leader
    }

    /// Waits until `pred` holds for the state (checked immediately, then on each change); returns
    /// the matching state, or `None` if the elector is gone.
    pub async fn wait_for(&self, pred: impl FnMut(&LeaderState) -> bool) -> Option<LeaderState> {
        let mut rx = self.rx.clone();
        rx.wait_for(pred).await.ok().map(|s| s.clone())
    }

    /// client-go's `HealthzAdaptor.Check`: fails only if this replica believes it leads and has not
    /// renewed within lease duration + `tolerance`; standbys are always healthy.
    pub fn check(&self, tolerance: Duration) -> Result<(), String> {
        let state = self.rx.borrow();
        if !state.is_leader {
            return Ok(());
        }
        match state.last_renew {
            Some(at) if at.elapsed() <= self.lease_duration + tolerance => Ok(()),
            _ => Err(format!(
                "failed election to renew leadership on lease {}",
                self.lease
            )),
        }
    }

    /// The `leaderElection` health check with upstream's 20 s tolerance, ready for the admin server.
    pub fn health_check(&self) -> impl Fn() -> Result<(), String> + Send + Sync + 'static {
        let status = self.clone();
        move || status.check(HEALTH_TOLERANCE)
    }
}

/// The `name` label: the lease name, as component-base labels it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabel {
    name: String,
}

/// client-go's leader election metrics, so existing dashboards and alerts keep working.
#[derive(Clone, Debug, Default)]
pub struct LeaderMetrics {
    master_status: Family<LeaseLabel, Gauge>,
    slowpath: Family<LeaseLabel, Counter>,
}

impl LeaderMetrics {
    /// Creates the metrics and registers `leader_election_master_status` and
    /// `leader_election_slowpath_total` in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        Self {
            master_status: registered(
                registry,
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
                metrics.master_status,
            ),
            slowpath: registered(
                registry,
                "leader_election_slowpath",
                "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease.",
                metrics.slowpath,
            ),
        }
    }

    pub(crate) fn set_leader(&self, lease: &str, leading: bool) {
        self.master_status
            .get_or_create(&LeaseLabel {
                name: lease.to_string(),
            })
            .set(i64::from(leading));
    }

    pub(crate) fn slowpath(&self, lease: &str) {
        self.slowpath
            .get_or_create(&LeaseLabel {
                name: lease.to_string(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn health_fails_only_for_a_leader_past_lease_plus_tolerance() {
        let (tx, rx) = watch::channel(LeaderState::default());
        let status = LeaderStatus::new(rx, Duration::from_secs(15), "kube-system/ccm".into());
        let check = status.health_check();
        assert!(check().is_ok(), "standby is healthy");

        tx.send_replace(LeaderState {
            is_leader: true,
            holder: Some("me".into()),
            last_renew: Some(Instant::now()),
        });
        tokio::time::advance(Duration::from_secs(35)).await;
        assert!(
            check().is_ok(),
            "exactly lease + tolerance is still healthy"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        let err = check().unwrap_err();
        assert!(err.contains("failed election to renew leadership"), "{err}");

        tx.send_replace(LeaderState::default());
        assert!(check().is_ok(), "no longer leader: healthy again");
    }

    #[test]
    fn master_status_gauge_is_exposed_with_lease_name() {
        let mut registry = Registry::default();
        let metrics = LeaderMetrics::register(&mut registry);
        metrics.set_leader("ccm", true);
        metrics.slowpath("ccm");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("leader_election_master_status{name=\"ccm\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("leader_election_slowpath_total{name=\"ccm\"} 1"),
            "{text}"
        );
    }
}
