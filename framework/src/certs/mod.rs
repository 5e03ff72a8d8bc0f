//! Self-managed webhook certificates, no cert-manager needed: the process makes a CA and a
//! serving certificate (rcgen), keeps them in one Secret all replicas share (the first writer
//! wins; see `secret`), serves the Secret's pair through the serving layer's swappable
//! [`Certificates`], renews the serving certificate at two thirds of its life (or when its
//! names change, or on the `controller-manager.io/rotate` annotation), and writes the CA bundle
//! into the webhook configurations and CRD conversion stanzas it is told to manage (`inject`),
//! pointing their `clientConfig` at a Service or URL when told to ([`ClientTarget`]).
//!
//! - `authority`: the CA and serving certificates; `secret`: the shared Secret;
//!   `inject`: `caBundle` and `clientConfig` injection.
//!
//! Not yet: rotating the CA itself (it is made for ten years; a rotation needs the two-CA
//! bundle and per-replica serving Leases of docs/webhooks.md).

mod authority;
mod error;
mod inject;
mod secret;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use authority::Pair;
// `testing::WebhookInstall` serves a test's webhooks under a CA of its own.
#[cfg(feature = "testing")]
pub(crate) use authority::{issue, new_ca};
pub use error::CertsError;
pub use inject::{ClientTarget, Managed, ManagedKind};
pub use secret::{ROTATE_ANNOTATION, Stored};

use crate::serving::Certificates;

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
}

impl SelfManagedCerts {
    /// Certificates in Secret `namespace/secret` for `dns_names`: serving certificates valid a
    /// year, the CA ten, checked every 30 s.
    pub fn new(namespace: &str, secret: &str, dns_names: Vec<String>) -> Self {
        SelfManagedCerts {
            namespace: namespace.to_string(),
            secret: secret.to_string(),
            dns_names,
            managed: Vec::new(),
            validity_days: 365,
            ca_validity_days: 3650,
            resync: Duration::from_secs(30),
        }
    }

    /// Keeps the `caBundle` of `managed` too.
    pub fn managing(mut self, managed: Vec<Managed>) -> Self {
        self.managed = managed;
        self
    }

    /// Reads the Secret, creating it (the first writer wins) or renewing its serving
    /// certificate as needed, once; replicas calling it at once get the same answer.
    pub async fn ensure(&self, client: &kube::Client) -> Result<Stored, CertsError> {
        let api: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        secret::ensure(&api, &self.wanted()).await
    }

    /// Reads (or creates, or renews) the Secret once, injects the bundle, and returns what to
    /// serve plus the task that keeps both up to date every [`Self::resync`] until `stop`.
    /// A managed object that does not exist yet, or a write that loses a race, is logged and
    /// retried on the next round.
    pub async fn start(
        &self,
        client: kube::Client,
        stop: CancellationToken,
    ) -> Result<(Certificates, JoinHandle<()>), CertsError> {
        let api: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        let stored = secret::ensure(&api, &self.wanted()).await?;
        let certificates = Certificates::from_pem(
            stored.serving.cert_pem.as_bytes(),
            stored.serving.key_pem.as_bytes(),
        )?;
        self.inject_all(&client, &stored.ca_bundle).await;
        let this = self.clone();
        let served = certificates.clone();
        let task = tokio::spawn(async move {
            let mut current = stored;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(this.resync) => {}
                }
                match secret::ensure(&api, &this.wanted()).await {
                    Ok(stored) => {
                        if stored.serving != current.serving {
                            match served.replace_pem(
                                stored.serving.cert_pem.as_bytes(),
                                stored.serving.key_pem.as_bytes(),
                            ) {
                                Ok(()) => {
                                    tracing::info!(secret = %this.secret, "serving the renewed webhook certificate")
                                }
                                Err(error) => {
                                    tracing::warn!(%error, "cannot serve the renewed webhook certificate")
                                }
                            }
                        }
                        this.inject_all(&client, &stored.ca_bundle).await;
                        current = stored;
                    }
                    Err(error) => {
                        tracing::warn!(%error, secret = %this.secret, "cannot read the webhook certificate Secret")
                    }
                }
            }
        });
        Ok((certificates, task))
    }

    fn wanted(&self) -> secret::Wanted {
        secret::Wanted {
            secret: self.secret.clone(),
            dns_names: self.dns_names.clone(),
            validity_days: self.validity_days,
            ca_validity_days: self.ca_validity_days,
        }
    }

    async fn inject_all(&self, client: &kube::Client, bundle: &str) {
        for managed in &self.managed {
            match managed.inject(client, bundle).await {
                Ok(true) => tracing::info!(%managed, "caBundle injected"),
                Ok(false) => {}
                Err(error) => tracing::warn!(%managed, %error, "cannot inject the caBundle"),
            }
        }
    }
}
