//! Leader election settings and their validation, kept apart from the loop so flags can be checked
//! before anything connects.

use std::time::Duration;

use super::LeaderError;

/// client-go's `JitterFactor`: retries wait `retry_period × [1, 2.2)`, so the renew deadline must
/// leave room for at least one jittered retry.
pub(crate) const JITTER_FACTOR: f64 = 1.2;

/// Where the lease lives and how long leadership lasts; defaults are kube-controller-manager's
/// (15 s / 10 s / 2 s), so an existing deployment keeps its failover timing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Lease name (`--leader-elect-resource-name`, upstream default `cloud-controller-manager`).
    pub lease_name: String,
    /// Lease namespace (`--leader-elect-resource-namespace`, upstream default `kube-system`).
    pub lease_namespace: String,
    /// This replica's holder identity; must be unique among replicas (see [`default_identity`]).
    pub identity: String,
    /// How long a standby waits after the last observed change before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a renewal before it gives up leadership.
    pub renew_deadline: Duration,
    /// Wait between attempts to acquire or renew.
    pub retry_period: Duration,
    /// Give the lease up on graceful shutdown (after the guarded work finished) so a standby takes
    /// over within a retry period instead of a lease duration. Upstream CCM does not; we default to
    /// `true` because the work is fully drained before release.
    pub release_on_cancel: bool,
}

impl LeaderElectionConfig {
    /// Upstream defaults for the given lease and identity.
    pub fn new(
        lease_namespace: impl Into<String>,
        lease_name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            lease_name: lease_name.into(),
            lease_namespace: lease_namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
        }
    }

    /// The same with these durations (lease, renew deadline, retry period), e.g. the scaled-down
    /// ones a test or benchmark uses so a takeover takes seconds.
    pub fn with_durations(
        mut self,
        lease: Duration,
        renew_deadline: Duration,
        retry: Duration,
    ) -> Self {
        self.lease_duration = lease;
        self.renew_deadline = renew_deadline;
        self.retry_period = retry;
        self
    }

    /// Checks client-go's rules (`lease_duration > renew_deadline > retry_period × 1.2`, all
    /// positive, names and identity set) and reports every violation with what to change.
    pub fn validate(&self) -> Result<(), LeaderError> {
        let mut errors = Vec::new();
        if self.lease_name.is_empty() {
            errors.push("lease name is empty: set the lease (resource) name".to_string());
        }
        if self.lease_namespace.is_empty() {
            errors.push("lease namespace is empty: set the lease (resource) namespace".to_string());
        }
        if self.identity.is_empty() {
            errors.push("identity is empty: set a unique identity, e.g. default_identity()".into());
        }
        for (name, value) in [
            ("lease duration", self.lease_duration),
            ("renew deadline", self.renew_deadline),
            ("retry period", self.retry_period),
        ] {
            if value.is_zero() {
                errors.push(format!("{name} must be greater than zero"));
            }
        }
        if self.lease_duration <= self.renew_deadline {
            errors.push(format!(
                "lease duration ({:?}) must be greater than renew deadline ({:?}): raise the lease duration or lower the renew deadline",
                self.lease_duration, self.renew_deadline
            ));
        }
        let min_deadline = self.retry_period.mul_f64(JITTER_FACTOR);
        if self.renew_deadline <= min_deadline {
            errors.push(format!(
                "renew deadline ({:?}) must be greater than retry period × {JITTER_FACTOR} ({:?}): raise the renew deadline or lower the retry period",
                self.renew_deadline, min_deadline
            ));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(LeaderError::InvalidConfig(errors))
        }
    }

    /// `leaseDurationSeconds` written to the Lease: whole seconds, rounded up and at least 1, so a
    /// sub-second test duration never produces a lease that is expired on arrival.
    pub(crate) fn lease_duration_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs_f64().ceil().max(1.0);
        secs.min(f64::from(i32::MAX)) as i32
    }
}

/// The host name used in identities and event sources; `localhost` when it cannot be read, so
/// start-up never fails on it.
pub fn host_name() -> String {
    hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| {
            tracing::warn!("cannot read the hostname; using \"localhost\"");
            "localhost".to_string()
        })
}

/// Holder identity as upstream builds it, `<hostname>_<uuid v4>`, unique even for two replicas on
/// one host.
pub fn default_identity() -> String {
    format!("{}_{}", host_name(), uuid::Uuid::new_v4())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(lease: u64, renew: u64, retry: u64) -> LeaderElectionConfig {
        let mut c = LeaderElectionConfig::new("kube-system", "ccm", "me");
        c.lease_duration = Duration::from_millis(lease);
        c.renew_deadline = Duration::from_millis(renew);
        c.retry_period = Duration::from_millis(retry);
        c
    }

    fn errors(c: &LeaderElectionConfig) -> Vec<String> {
        match c.validate() {
            Ok(()) => vec![],
            Err(LeaderError::InvalidConfig(e)) => e,
            Err(other) => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn upstream_defaults_are_valid() {
        let c = LeaderElectionConfig::new("kube-system", "cloud-controller-manager", "a_1");
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert_eq!(c.retry_period, Duration::from_secs(2));
        assert!(c.validate().is_ok());
        assert_eq!(c.lease_duration_seconds(), 15);
    }

    #[test]
    fn lease_must_exceed_renew_deadline() {
        let e = errors(&cfg(10_000, 10_000, 2_000));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("lease duration"), "{e:?}");
    }

    #[test]
    fn renew_deadline_must_exceed_jittered_retry() {
        // 2.4 s is exactly 1.2 × 2 s: rejected as in client-go (strictly greater).
        let e = errors(&cfg(15_000, 2_400, 2_000));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("retry period × 1.2"), "{e:?}");
        assert!(errors(&cfg(15_000, 2_500, 2_000)).is_empty());
    }

    #[test]
    fn all_problems_are_reported_together() {
        let mut c = cfg(0, 0, 0);
        c.identity.clear();
        c.lease_name.clear();
        let e = errors(&c);
        assert!(e.len() >= 6, "{e:?}");
    }

    #[test]
    fn sub_second_lease_rounds_up_to_one_second() {
        assert_eq!(cfg(600, 400, 100).lease_duration_seconds(), 1);
        assert_eq!(cfg(1_500, 400, 100).lease_duration_seconds(), 2);
    }

    #[test]
    fn default_identity_is_host_underscore_uuid() {
        let id = default_identity();
        let (host, uuid) = id.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{id}");
        assert_ne!(default_identity(), id);
    }
}
