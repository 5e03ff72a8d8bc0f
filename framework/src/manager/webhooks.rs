//! The manager's webhook hook: `--webhooks` checked with the controllers' selection code and
//! messages, and the webhook server started on every replica before leader election (and
//! stopped after the controllers drained, answering every review in flight), with its informers
//! on the process's one factory and `webhook-server` on `/readyz`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::run::{Manager, ManagerError};
use super::selection::{ControllerSelection, KnownControllers};
use crate::certs::{Managed, ManagedKind};
use crate::informer::SharedInformerFactory;
use crate::serving::{Certificates, Server, Tls};
use crate::webhook::{
    CertSource, ConfigurationKind, WebhookContext, WebhookMetrics, WebhookServer, WebhookServing,
    Webhooks, layers, mismatches,
};

/// The `/readyz` check of the webhook server.
pub(super) const WEBHOOK_CHECK: &str = "webhook-server";

impl<C: Send + Sync + 'static> Manager<C> {
    /// Serves `webhooks` as `serving` says (`None`: no webhook server, as
    /// `--webhook-secure-port=0`), on every replica, leader or not.
    pub fn with_webhooks(mut self, webhooks: Webhooks<C>, serving: Option<WebhookServing>) -> Self {
        self.webhooks = webhooks;
        self.webhook_serving = serving;
        self
    }

    /// The webhook names `--webhooks` may use.
    fn known_webhooks(&self) -> KnownControllers {
        let mut known = KnownControllers::of("webhooks");
        for w in self.webhooks.iter() {
            known.add(w.name(), &[], !w.enabled_by_default());
        }
        known
    }

    /// Checks the map and `--webhooks`; the selection, or `None` without a webhook server.
    pub(super) fn webhook_selection(&self) -> Result<Option<ControllerSelection>, ManagerError> {
        self.webhooks
            .check()
            .map_err(|e| ManagerError::Webhooks(e.to_string()))?;
        let Some(serving) = &self.webhook_serving else {
            return Ok(None);
        };
        Ok(Some(ControllerSelection::parse(
            &serving.webhooks,
            &self.known_webhooks(),
        )?))
    }

    /// The process's one informer factory, made on first use, shared by webhooks and
    /// controllers.
    pub(super) fn informer_factory(&self) -> Result<SharedInformerFactory, ManagerError> {
        if let Some(factory) = self.factory.get() {
            return Ok(factory.clone());
        }
        let client = self
            .clients
            .root_client("shared-informers")
            .map_err(ManagerError::Client)?;
        let factory = SharedInformerFactory::new(client)
            .with_default_resync(self.config.min_resync_period.map(super::phases::jittered))
            .with_watch_list(self.config.watch_list)
            .with_cache_options(self.config.cache.clone());
        Ok(self.factory.get_or_init(|| factory).clone())
    }

    /// Refuses to start when a webhook configuration among `managed` sends a selected typed
    /// webhook another kind than its Rust type, or a defaulter sits in a validating
    /// configuration ([`mismatches`]); one that does not exist yet is skipped (the certificate
    /// manager injects it once it does).
    async fn check_configurations(
        &self,
        managed: &[Managed],
        selection: &ControllerSelection,
    ) -> Result<(), ManagerError> {
        let mut errors = Vec::new();
        for m in managed {
            let kind = match m.kind {
                ManagedKind::Validating => ConfigurationKind::Validating,
                ManagedKind::Mutating => ConfigurationKind::Mutating,
                ManagedKind::CustomResourceDefinition => continue,
            };
            let Some(object) = m
                .kind
                .api(&self.client)
                .get_opt(&m.name)
                .await
                .map_err(|e| ManagerError::Webhooks(format!("cannot read {m}: {e}")))?
            else {
                continue;
            };
            let json = serde_json::to_value(&object)
                .map_err(|e| ManagerError::Webhooks(format!("{m}: {e}")))?;
            errors.extend(mismatches(
                &self.webhooks,
                |name| selection.is_enabled(name),
                kind,
                &json,
            ));
        }
        match errors.is_empty() {
            true => Ok(()),
            false => Err(ManagerError::Webhooks(errors.join("; "))),
        }
    }

    /// Builds every selected webhook and serves them until `stop`; `None` when there is nothing
    /// to serve. A webhook that cannot be built, a port that cannot be bound or certificate
    /// files that do not load stop start-up, naming what failed. Once `draining` fires,
    /// `webhook-server` fails on `/readyz` (the replica leaves the Service's endpoints) while
    /// reviews are still answered, until `stop`.
    pub(super) async fn start_webhooks(
        &self,
        draining: &CancellationToken,
        stop: &CancellationToken,
    ) -> Result<Option<JoinHandle<()>>, ManagerError> {
        let (Some(selection), Some(serving)) = (self.webhook_selection()?, &self.webhook_serving)
        else {
            return Ok(None);
        };
        let enabled: Vec<_> = self
            .webhooks
            .iter()
            .filter(|w| selection.is_enabled(w.name()))
            .collect();
        if enabled.is_empty() {
            return Ok(None);
        }
        let failed = |what: String| ManagerError::Webhooks(what);
        let certificates = match &serving.certificates {
            CertSource::Files { cert, key } => Certificates::from_files(cert, key)
                .and_then(|c| c.with_sni(&serving.tls.sni))
                .map_err(|e| failed(e.to_string()))?,
            CertSource::SelfManaged(certs) => {
                self.check_configurations(&certs.managed, &selection)
                    .await?;
                // The renewal task ends with `stop`.
                let (certificates, _renewals) = certs
                    .start(self.client.clone(), stop.clone())
                    .await
                    .map_err(|e| failed(format!("self-managed webhook certificates: {e}")))?;
                certificates
            }
        };
        let tls = Tls::new(certificates, &serving.tls).map_err(|e| failed(e.to_string()))?;
        let factory = self.informer_factory()?;
        let metrics = WebhookMetrics::new(&mut self.registry.lock());
        let mut server = WebhookServer::new();
        for webhook in enabled {
            let ctx = WebhookContext {
                name: webhook.name().to_string(),
                path: webhook.path().to_string(),
                client: self.client.clone(),
                factory: factory.clone(),
                shutdown: stop.clone(),
                extra: self.extra.clone(),
            };
            let endpoint = webhook
                .build(ctx)
                .await
                .map_err(|e| failed(format!("error starting webhook {:?}: {e}", webhook.name())))?;
            let route = layers::standard(
                webhook.name(),
                webhook.path(),
                &metrics,
                serving.handler_timeout,
                endpoint,
            );
            server = server
                .route(webhook.path(), route)
                .map_err(|path| failed(format!("two webhooks are served at {path}")))?;
            info!(webhook = %webhook.name(), path = %webhook.path(), "starting webhook");
        }
        let bound = Server::bind(serving.addr, serving.sharing)
            .map_err(|e| failed(e.to_string()))?
            .with_tls(tls);
        info!(addr = %bound.local_addr(), paths = ?server.paths(), "serving webhooks");
        factory.start(stop.clone());
        let serving_now = Arc::new(AtomicBool::new(true));
        let up = serving_now.clone();
        let f = factory.clone();
        let leaving = draining.clone();
        self.ready.add_check(WEBHOOK_CHECK, move || {
            if !up.load(Ordering::Acquire) {
                return Err("not serving".to_string());
            }
            if leaving.is_cancelled() {
                return Err("shutting down; answering the reviews in flight".to_string());
            }
            let unsynced: Vec<String> = f
                .informers_status()
                .into_iter()
                .filter(|s| s.started && !s.synced)
                .map(|s| s.kind)
                .collect();
            match unsynced.is_empty() {
                true => Ok(()),
                false => Err(format!(
                    "webhook caches not synced: {}",
                    unsynced.join(", ")
                )),
            }
        });
        let stop = stop.clone();
        Ok(Some(tokio::spawn(async move {
            if let Err(error) = server.serve(bound, stop).await {
                warn!(%error, "the webhook server stopped");
            }
            serving_now.store(false, Ordering::Release);
        })))
    }
}
