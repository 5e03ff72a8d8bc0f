//! The leader record client-go keeps in a Lease spec, and its mapping to and from the object, so the
//! election logic compares and writes plain values.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;

/// client-go's `LeaderElectionRecord` for the Lease lock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LeaderRecord {
    /// Empty when nobody holds the lease (never held, or released).
    pub holder: String,
    pub lease_duration_seconds: i32,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub transitions: i32,
}

impl LeaderRecord {
    /// Reads the record from a Lease; missing fields read as zero values, as in client-go.
    pub fn from_lease(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        Self {
            holder: spec.holder_identity.unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or_default(),
        }
    }

    /// Writes the record into `lease` for a replace; metadata (and with it the resourceVersion that
    /// makes the write conditional) is kept, managed fields are dropped.
    pub fn apply_to(&self, mut lease: Lease) -> Lease {
        let previous = lease.spec.take().unwrap_or_default();
        lease.metadata.managed_fields = None;
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.holder.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.transitions),
            preferred_holder: previous.preferred_holder,
            strategy: previous.strategy,
        });
        lease
    }

    /// A new Lease holding this record, for the first create.
    pub fn new_lease(&self, namespace: &str, name: &str) -> Lease {
        self.apply_to(Lease {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            spec: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_a_lease_and_keeps_resource_version() {
        let rec = LeaderRecord {
            holder: "a_1".into(),
            lease_duration_seconds: 15,
            acquire_time: Some(Timestamp::from_second(1_000).unwrap()),
            renew_time: Some(Timestamp::from_second(1_010).unwrap()),
            transitions: 3,
        };
        let mut lease = rec.new_lease("kube-system", "ccm");
        lease.metadata.resource_version = Some("42".into());
        let again = rec.apply_to(lease.clone());
        assert_eq!(again.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(LeaderRecord::from_lease(&again), rec);
    }

    #[test]
    fn empty_lease_reads_as_unheld() {
        let rec = LeaderRecord::from_lease(&Lease::default());
        assert!(rec.holder.is_empty());
        assert_eq!(rec.transitions, 0);
    }
}
