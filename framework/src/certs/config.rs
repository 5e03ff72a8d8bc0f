//! [`SelfManagedCerts`]: where the certificates are kept, what they cover, where the CA bundle
//! goes, and how often all of it is checked; one read-and-step of the Secret
//! ([`SelfManagedCerts::ensure`]) and the bundle's injection.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::error::CertsError;
use super::inject::Managed;
use super::lease::{self, ServingLeases};
use super::secret::{self, Stored};

/// Where the certificates are kept, what they cover, and where the CA bundle goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelfManagedCerts {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub secret: String,
    /// The serving certificate's names: the webhook Service's DNS names
    /// (`NAME.NAMESPACE.svc`), or the host of its URL; IP addresses are allowed.
    pub dns_names: Vec<String>,
    /// The objects whose `caBundle` is kept.
    pub managed: Vec<Managed>,
    /// How long a serving certificate is valid (renewed at two thirds).
    pub validity_days: u32,
    /// How long the CA is valid.
    pub ca_validity_days: u32,
    /// How often the Secret is read again and the bundle re-injected.
    pub resync: Duration,
    /// This replica's name in its serving Lease (`<secret>-serving-<identity>`); a DNS label.
    pub identity: String,
    /// How often the serving Lease is renewed.
    pub lease_renew: Duration,
    /// How long a serving Lease counts after its last renewal (whole seconds).
    pub lease_duration: Duration,
}

impl SelfManagedCerts {
    /// Certificates in Secret `namespace/secret` for `dns_names`: serving certificates valid a
    /// year, the CA ten, checked every 5 s; the serving Lease renewed every 10 s and counting
    /// for 40 s, named for the host and a random suffix.
    pub fn new(namespace: &str, secret: &str, dns_names: Vec<String>) -> Self {
        SelfManagedCerts {
            namespace: namespace.to_string(),
            secret: secret.to_string(),
            dns_names,
            managed: Vec::new(),
            validity_days: 365,
            ca_validity_days: 3650,
            resync: Duration::from_secs(5),
            identity: lease::default_identity(),
            lease_renew: Duration::from_secs(10),
            lease_duration: Duration::from_secs(40),
        }
    }

    /// Keeps the `caBundle` of `managed` too.
    pub fn managing(mut self, managed: Vec<Managed>) -> Self {
        self.managed = managed;
        self
    }

    /// Reads the Secret once, creating it (the first writer wins) or taking the next step it
    /// needs (a renewal, a step of a CA rotation whose gate is open); replicas calling it at
    /// once get the same answer.
    pub async fn ensure(&self, client: &kube::Client) -> Result<Stored, CertsError> {
        let api: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        let leases = self.leases(client);
        secret::ensure(&api, &self.wanted(), &self.gates(client, &leases)).await
    }
}

impl SelfManagedCerts {
    pub(super) fn leases(&self, client: &kube::Client) -> ServingLeases {
        ServingLeases::new(
            client.clone(),
            &self.namespace,
            &self.secret,
            &self.identity,
            self.lease_duration,
        )
    }

    fn gates<'a>(
        &'a self,
        client: &'a kube::Client,
        leases: &'a ServingLeases,
    ) -> secret::Gates<'a> {
        secret::Gates {
            client,
            managed: &self.managed,
            leases,
        }
    }

    fn wanted(&self) -> secret::Wanted {
        secret::Wanted {
            secret: self.secret.clone(),
            dns_names: self.dns_names.clone(),
            validity_days: self.validity_days,
            ca_validity_days: self.ca_validity_days,
        }
    }

    pub(super) async fn inject_all(&self, client: &kube::Client, bundle: &str) {
        for managed in &self.managed {
            match managed.inject(client, bundle).await {
                Ok(true) => tracing::info!(%managed, "caBundle injected"),
                Ok(false) => {}
                Err(error) => tracing::warn!(%managed, %error, "cannot inject the caBundle"),
            }
        }
    }
}
