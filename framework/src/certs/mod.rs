//! Self-managed webhook certificates, no cert-manager needed: the process makes a CA and a
//! serving certificate (rcgen), keeps them in one Secret all replicas share (the first writer
//! wins; see `secret`), serves the Secret's pair through the serving layer's swappable
//! [`Certificates`], renews the serving certificate at two thirds of its life (or when its
//! names change, or on the `controller-manager.io/rotate` annotation), rotates the CA at two
//! thirds of its life (or on `controller-manager.io/rotate: ca`) in four steps that never leave
//! a replica serving a certificate the configurations do not trust (`rotation`), and writes the
//! CA bundle into the webhook configurations and CRD conversion stanzas it is told to manage
//! (`inject`), pointing their `clientConfig` at a Service or URL when told to ([`ClientTarget`]).
//!
//! - `config`: [`SelfManagedCerts`]; `authority`: the CA and serving certificates;
//!   `secret`: the shared Secret;
//!   `rotation`: the next write it needs; `lease`: each replica's serving Lease;
//!   `keeper`: the task that keeps a replica's certificate, Lease and bundles up to date;
//!   `inject`: `caBundle` and `clientConfig` injection.

mod authority;
mod config;
mod error;
mod inject;
mod keeper;
mod lease;
mod rotation;
mod secret;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use authority::{Pair, fingerprint};
// `testing::WebhookInstall` serves a test's webhooks under a CA of its own.
#[cfg(feature = "testing")]
pub(crate) use authority::{issue, new_ca};
pub use config::SelfManagedCerts;
pub use error::CertsError;
pub use inject::{ClientTarget, Managed, ManagedKind};
pub use lease::SERVING_CERTIFICATE_ANNOTATION;
pub use rotation::ROTATE_CA;
pub use secret::{ROTATE_ANNOTATION, Stored};

use crate::serving::Certificates;

impl SelfManagedCerts {
    /// Says in this replica's Lease that it serves nothing yet (so that no CA leaves the
    /// bundle before it serves), reads (or creates, or steps) the Secret, injects the bundle,
    /// and returns what to serve plus the task that keeps all of it up to date until `stop`,
    /// then deletes the Lease. A managed object that does not exist yet, or a write that loses
    /// a race, is logged and retried on the next round.
    pub async fn start(
        &self,
        client: kube::Client,
        stop: CancellationToken,
    ) -> Result<(Certificates, JoinHandle<()>), CertsError> {
        let leases = self.leases(&client);
        leases.renew("").await?;
        let stored = self.ensure(&client).await?;
        let certificates = Certificates::from_pem(
            stored.serving.cert_pem.as_bytes(),
            stored.serving.key_pem.as_bytes(),
        )?;
        leases
            .renew(&authority::fingerprint(&stored.serving.cert_pem)?)
            .await?;
        self.inject_all(&client, &stored.ca_bundle).await;
        let keeper = keeper::Keeper {
            certs: self.clone(),
            client,
            leases,
            served: certificates.clone(),
            current: stored,
        };
        Ok((certificates, tokio::spawn(keeper.run(stop))))
    }
}
