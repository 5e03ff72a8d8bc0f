//! [`Keeper`]: the task each replica runs for its self-managed certificates. Every `resync` it
//! reads the Secret (taking the next step it needs when its gate is open), serves a changed
//! serving certificate from the next handshake and says so in its Lease at once, and injects the
//! bundle; every `lease_renew` it renews its Lease. On stop it deletes the Lease.

use tokio_util::sync::CancellationToken;

use super::authority::fingerprint;
use super::config::SelfManagedCerts;
use super::lease::ServingLeases;
use super::secret::Stored;
use crate::serving::Certificates;

/// One replica's certificates, Lease and bundles, kept up to date.
pub(super) struct Keeper {
    pub(super) certs: SelfManagedCerts,
    pub(super) client: kube::Client,
    pub(super) leases: ServingLeases,
    pub(super) served: Certificates,
    pub(super) current: Stored,
}

impl Keeper {
    /// Runs until `stop`, then deletes the Lease.
    pub(super) async fn run(mut self, stop: CancellationToken) {
        let mut resync = tokio::time::interval(self.certs.resync);
        let mut renew = tokio::time::interval(self.certs.lease_renew);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first ticks are immediate; `start` has just done both.
        resync.tick().await;
        renew.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = resync.tick() => self.sync().await,
                _ = renew.tick() => self.renew().await,
            }
        }
        if let Err(error) = self.leases.release().await {
            tracing::warn!(%error, "cannot delete the serving Lease");
        }
    }

    /// Reads (and maybe steps) the Secret, serves what it holds, injects its bundle.
    async fn sync(&mut self) {
        let stored = match self.certs.ensure(&self.client).await {
            Ok(stored) => stored,
            Err(error) => {
                let secret = &self.certs.secret;
                tracing::warn!(%error, %secret, "cannot read the webhook certificate Secret");
                return;
            }
        };
        if stored.serving != self.current.serving {
            let (cert, key) = (&stored.serving.cert_pem, &stored.serving.key_pem);
            if let Err(error) = self.served.replace_pem(cert.as_bytes(), key.as_bytes()) {
                tracing::warn!(%error, "cannot serve the renewed webhook certificate");
                return;
            }
            tracing::info!(secret = %self.certs.secret, "serving the renewed webhook certificate");
            self.current.serving = stored.serving.clone();
            self.renew().await;
        }
        self.certs.inject_all(&self.client, &stored.ca_bundle).await;
        self.current = stored;
    }

    /// Renews the Lease with the fingerprint of the certificate served.
    async fn renew(&self) {
        let result = match fingerprint(&self.current.serving.cert_pem) {
            Ok(served) => self.leases.renew(&served).await,
            Err(error) => Err(error),
        };
        if let Err(error) = result {
            tracing::warn!(%error, "cannot renew the serving Lease");
        }
    }
}
