//! A member's own Lease in a ring (create, renew with its published view, delete) and the live set
//! of the ring, judged as client-go judges a leader's Lease: on the local clock, from when each
//! Lease was last seen to change.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Preconditions};
use tokio::time::Instant;

use super::label::member_value;
use crate::leader::record::LeaderRecord;
use crate::leader::store::{KubeLeaseStore, LeaseStore};

/// Label naming the ring a member Lease belongs to.
pub const RING_LABEL: &str = "controller-manager.io/shard-ring";
/// Annotation holding the id of the view the member has published (drained for).
pub const VIEW_ANNOTATION: &str = "controller-manager.io/shard-view";
/// Annotation holding the member's assignment mode (`hash` or `label`), so a member can tell a
/// ring whose replicas disagree on it.
pub const ASSIGNMENT_ANNOTATION: &str = "controller-manager.io/shard-assignment";

/// The least time a dead member's Lease stays after it expired, whatever its lease duration.
const MIN_DEAD_WAIT: Duration = Duration::from_secs(1);

/// The member's own Lease (get, create, replace through [`LeaseStore`]) plus the ring-wide calls.
pub(crate) trait RingStore: LeaseStore {
    /// Every Lease of the ring (by [`RING_LABEL`]).
    fn list(&self) -> BoxFuture<'_, Result<Vec<Lease>, kube::Error>>;
    /// Deletes the member's own Lease; a missing one is not an error.
    fn delete(&self) -> BoxFuture<'_, Result<(), kube::Error>>;
    /// Deletes another member's Lease `name` if it is still at `resource_version`; `false` when
    /// it is gone or has changed since (its member came back).
    fn delete_expired<'a>(
        &'a self,
        name: &'a str,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<bool, kube::Error>>;
}

/// The Lease name of `identity` in `ring`: `<ring>-<16 hex of the identity's hash>`, a valid DNS
/// name whatever the identity contains.
pub fn lease_name(ring: &str, identity: &str) -> String {
    format!("{ring}-{}", member_value(identity))
}

/// The real store: the member's own Lease through the leader election's [`KubeLeaseStore`], plus
/// the ring's label selector.
pub(crate) struct KubeRingStore {
    own: KubeLeaseStore,
    selector: String,
}

impl KubeRingStore {
    pub fn new(client: kube::Client, namespace: &str, ring: &str, name: &str) -> Self {
        Self {
            own: KubeLeaseStore::new(client, namespace, name),
            selector: format!("{RING_LABEL}={ring}"),
        }
    }
}

impl LeaseStore for KubeRingStore {
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, kube::Error>> {
        self.own.get()
    }

    fn create(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, kube::Error>> {
        self.own.create(lease)
    }

    fn replace(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, kube::Error>> {
        self.own.replace(lease)
    }
}

impl RingStore for KubeRingStore {
    fn list(&self) -> BoxFuture<'_, Result<Vec<Lease>, kube::Error>> {
        Box::pin(async move {
            let lp = ListParams::default().labels(&self.selector);
            Ok(self.own.api.list(&lp).await?.items)
        })
    }

    fn delete(&self) -> BoxFuture<'_, Result<(), kube::Error>> {
        Box::pin(async move {
            match self
                .own
                .api
                .delete(&self.own.name, &DeleteParams::default())
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e),
            }
        })
    }

    fn delete_expired<'a>(
        &'a self,
        name: &'a str,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<bool, kube::Error>> {
        Box::pin(async move {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(resource_version.to_string()),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            match self.own.api.delete(name, &dp).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        })
    }
}

/// Another member as last listed: its identity and the view id it has published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Peer {
    pub identity: String,
    pub view: Option<String>,
    /// The assignment mode it publishes (none from releases before the annotation).
    pub assignment: Option<String>,
}

/// When a Lease was last seen to change (local clock) and for how long it then stays live.
struct Seen {
    resource_version: Option<String>,
    at: Instant,
    duration: Duration,
}

/// One member's side of a ring's Leases.
pub(crate) struct Membership {
    store: Arc<dyn RingStore>,
    ring: String,
    namespace: String,
    name: String,
    identity: String,
    lease_duration_seconds: i32,
    assignment: &'static str,
    own: Option<Lease>,
    seen: HashMap<String, Seen>,
}

impl Membership {
    pub fn new(
        store: Arc<dyn RingStore>,
        ring: &str,
        namespace: &str,
        identity: &str,
        lease_duration_seconds: i32,
        assignment: &'static str,
    ) -> Self {
        Self {
            store,
            ring: ring.to_string(),
            namespace: namespace.to_string(),
            name: lease_name(ring, identity),
            identity: identity.to_string(),
            lease_duration_seconds,
            assignment,
            own: None,
            seen: HashMap::new(),
        }
    }

    /// Renews the member's Lease, publishing `view` (none while joining). Re-reads the Lease after
    /// any failure, so a conflict (someone edited it) costs one retry period.
    pub async fn renew(&mut self, view: Option<&str>) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let base = match self.own.take() {
            Some(lease) => Some(lease),
            None => self.store.get().await?,
        };
        let acquire_time = base
            .as_ref()
            .map(LeaderRecord::from_lease)
            .filter(|r| r.holder == self.identity)
            .and_then(|r| r.acquire_time)
            .unwrap_or(now);
        let record = LeaderRecord {
            holder: self.identity.clone(),
            lease_duration_seconds: self.lease_duration_seconds,
            acquire_time: Some(acquire_time),
            renew_time: Some(now),
            transitions: 0,
        };
        let exists = base.is_some();
        let mut lease = match base {
            Some(lease) => record.apply_to(lease),
            None => record.new_lease(&self.namespace, &self.name),
        };
        lease
            .metadata
            .labels
            .get_or_insert_default()
            .insert(RING_LABEL.to_string(), self.ring.clone());
        let annotations = lease.metadata.annotations.get_or_insert_default();
        annotations.insert(
            ASSIGNMENT_ANNOTATION.to_string(),
            self.assignment.to_string(),
        );
        match view {
            Some(v) => annotations.insert(VIEW_ANNOTATION.to_string(), v.to_string()),
            None => annotations.remove(VIEW_ANNOTATION),
        };
        let written = if exists {
            self.store.replace(lease).await?
        } else {
            self.store.create(lease).await?
        };
        self.own = Some(written);
        Ok(())
    }

    /// Deletes the member's Lease (graceful leave).
    pub async fn delete(&mut self) -> Result<(), kube::Error> {
        self.own = None;
        self.store.delete().await
    }

    /// Lists the ring and returns the other members whose Lease is live on the local clock.
    ///
    /// Deletes the Leases of members that died without leaving (a `kill -9`, a lost node): each
    /// restart of a pod is a new identity, so without this a Deployment's ring would keep one
    /// Lease per crash forever. A Lease goes once it has been expired for one more whole lease
    /// duration on this member's clock, and only at the resourceVersion this member saw, as
    /// kube-apiserver's garbage collector of its own identity Leases deletes expired ones. Its
    /// member is not live either way; if it was only cut off, it stopped reconciling at its renew
    /// deadline and creates its Lease again when it can renew.
    pub async fn live_peers(&mut self) -> Result<Vec<Peer>, kube::Error> {
        let leases = self.store.list().await?;
        let (peers, dead) = self.observe(leases, Instant::now());
        for (name, resource_version) in dead {
            match self.store.delete_expired(&name, &resource_version).await {
                Ok(true) => {
                    tracing::info!(ring = %self.ring, lease = %name, "deleted the Lease of a member that died without leaving");
                    self.seen.remove(&name);
                }
                Ok(false) => {}
                Err(err) => {
                    tracing::debug!(ring = %self.ring, lease = %name, error = %err, "cannot delete a dead member's Lease yet");
                }
            }
        }
        Ok(peers)
    }

    /// The live peers in `leases`, and the (name, resourceVersion) of Leases dead long enough to
    /// delete (see [`Self::live_peers`]).
    fn observe(&mut self, leases: Vec<Lease>, now: Instant) -> (Vec<Peer>, Vec<(String, String)>) {
        let mut peers = Vec::new();
        let mut dead = Vec::new();
        let mut present = Vec::new();
        for lease in leases {
            let Some(name) = lease.metadata.name.clone() else {
                continue;
            };
            if name == self.name {
                continue;
            }
            let record = LeaderRecord::from_lease(&lease);
            let rv = lease.metadata.resource_version.clone();
            let duration =
                Duration::from_secs(u64::try_from(record.lease_duration_seconds).unwrap_or(0));
            let seen = self.seen.entry(name.clone()).or_insert(Seen {
                resource_version: None,
                at: now,
                duration,
            });
            if seen.resource_version != rv {
                *seen = Seen {
                    resource_version: rv,
                    at: now,
                    duration,
                };
            }
            let expired_at = seen.at + seen.duration;
            if expired_at + seen.duration.max(MIN_DEAD_WAIT) <= now
                && let Some(rv) = &seen.resource_version
            {
                dead.push((name.clone(), rv.clone()));
            }
            present.push(name);
            if record.holder.is_empty() || expired_at <= now {
                continue;
            }
            let annotation = |key: &str| {
                lease
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(key).cloned())
            };
            peers.push(Peer {
                identity: record.holder,
                view: annotation(VIEW_ANNOTATION),
                assignment: annotation(ASSIGNMENT_ANNOTATION),
            });
        }
        self.seen.retain(|name, _| present.contains(name));
        (peers, dead)
    }
}
