//! The serving Leases: each replica keeps one Lease of its own, `<secret>-serving-<identity>` in
//! the Secret's namespace, renewed every few seconds and annotated with the fingerprint of the
//! certificate it serves. The last step of a CA rotation waits until every live Lease names the
//! Secret's serving certificate; a Lease not renewed within its duration (a dead replica's) stops
//! counting. A replica shutting down deletes its own.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};

use super::error::CertsError;

/// The annotation naming the fingerprint (SHA-256 of the DER, hex) of the certificate served.
pub const SERVING_CERTIFICATE_ANNOTATION: &str = "controller-manager.io/serving-certificate";

/// One replica's Lease, and the reading of everyone's.
#[derive(Clone, Debug)]
pub(crate) struct ServingLeases {
    api: Api<Lease>,
    prefix: String,
    identity: String,
    duration: Duration,
}

impl ServingLeases {
    /// The Leases of Secret `namespace/secret`; this replica's named for `identity`, valid
    /// `duration` after each renewal.
    pub(crate) fn new(
        client: kube::Client,
        namespace: &str,
        secret: &str,
        identity: &str,
        duration: Duration,
    ) -> Self {
        ServingLeases {
            api: Api::namespaced(client, namespace),
            prefix: format!("{secret}-serving-"),
            identity: identity.to_string(),
            duration,
        }
    }

    fn name(&self) -> String {
        format!("{}{}", self.prefix, self.identity)
    }

    /// Says that this replica serves the certificate with `fingerprint` (empty: none yet), and
    /// renews its Lease.
    pub(crate) async fn renew(&self, fingerprint: &str) -> Result<(), CertsError> {
        let name = self.name();
        let seconds = i32::try_from(self.duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let now = MicroTime(Timestamp::now());
        let mut lease = self.api.get_opt(&name).await?.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                acquire_time: Some(now.clone()),
                ..LeaseSpec::default()
            }),
        });
        lease.metadata.managed_fields = None;
        lease.metadata.annotations.get_or_insert_default().insert(
            SERVING_CERTIFICATE_ANNOTATION.to_string(),
            fingerprint.to_string(),
        );
        let spec = lease.spec.get_or_insert_default();
        spec.holder_identity = Some(self.identity.clone());
        spec.lease_duration_seconds = Some(seconds);
        spec.renew_time = Some(now);
        if lease.metadata.resource_version.is_some() {
            self.api
                .replace(&name, &PostParams::default(), &lease)
                .await?;
        } else {
            self.api.create(&PostParams::default(), &lease).await?;
        }
        Ok(())
    }

    /// Deletes this replica's Lease, so that it stops counting at once.
    pub(crate) async fn release(&self) -> Result<(), CertsError> {
        match self
            .api
            .delete(&self.name(), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether every live Lease of the Secret names `fingerprint`.
    pub(crate) async fn all_serve(&self, fingerprint: &str) -> Result<bool, CertsError> {
        let now = Timestamp::now();
        let leases = self.api.list(&ListParams::default()).await?;
        Ok(leases
            .items
            .iter()
            .filter(|l| {
                l.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(&self.prefix))
            })
            .filter(|l| live(l, now))
            .all(|l| {
                l.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(SERVING_CERTIFICATE_ANNOTATION))
                    .is_some_and(|f| f == fingerprint)
            }))
    }
}

/// Whether `lease` was renewed less than its duration before `now`.
fn live(lease: &Lease, now: Timestamp) -> bool {
    let Some(spec) = &lease.spec else {
        return false;
    };
    let (Some(renewed), Some(seconds)) = (&spec.renew_time, spec.lease_duration_seconds) else {
        return false;
    };
    now < renewed.0 + SignedDuration::from_secs(i64::from(seconds))
}

/// A name part for this process's Lease: the host name, lowercased and cut to what an object
/// name allows, and a random suffix, so that a restarted replica never renews a dead one's.
pub(crate) fn default_identity() -> String {
    let host: String = crate::leader::host_name()
        .to_lowercase()
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' => c,
            _ => '-',
        })
        .take(63)
        .collect();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{}-{}", host.trim_matches('-'), &suffix[..8])
}
