//! `sync_service`: one Service key, from the cache to the cloud and back to the Service's status
//! (upstream `syncService`, `processServiceCreateOrUpdate`, `syncLoadBalancerIfNeeded`).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{LoadBalancerStatus, ObjectReference, Service};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::error::ServiceSyncError;
use super::metrics::ServiceMetrics;
use super::node_set::{EligibleNodeCache, EligibleNodes, NodeRevision};
use super::patch;
use super::predicates::{needs_cleanup, needs_update, wants_load_balancer};
use super::{NodeLister, ServiceLister};
use crate::cloud::{CloudError, CloudProvider, LoadBalancer};
use crate::event_sink::{EventSink, EventType};
use crate::names::service_lb::CONTROLLER_NAME;

/// What `sync_load_balancer_if_needed` did, so the caller knows whether to forget the Service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Ensure,
    Delete,
}

/// The service (LoadBalancer) controller's logic, independent of how keys are queued.
///
/// The caller guarantees a key is never synced by two tasks at once (the work queue's contract);
/// the caches below are only locked for map access, never across a cloud or API call.
pub struct ServiceController {
    pub(super) cloud: Arc<dyn CloudProvider>,
    pub(super) api: kube::Client,
    pub(super) services: Arc<dyn ServiceLister>,
    pub(super) nodes: Arc<dyn NodeLister>,
    pub(super) events: Arc<dyn EventSink>,
    pub(super) cluster_name: String,
    pub(super) metrics: ServiceMetrics,
    /// Key → last Service object processed; needed to delete load balancers of Services that
    /// vanished without a finalizer, and as the set of Services a node sync visits.
    pub(super) service_cache: Mutex<HashMap<String, Arc<Service>>>,
    /// Key → node set the cloud last accepted for the Service's load balancer (an ensure or a
    /// host update that succeeded); a failed or cancelled call leaves it as it was.
    pub(super) last_synced_nodes: Mutex<HashMap<String, Arc<EligibleNodes>>>,
    /// The eligible node set, built once per change of the Node cache and shared by every load
    /// balancer given it.
    pub(super) eligible: EligibleNodeCache,
    /// Cancelled when the manager stops: an update waiting out a quota refusal in place stops
    /// waiting, so a pass in flight ends at the load balancer it is at.
    pub(super) shutdown: CancellationToken,
    /// Key → lock held across an ensure or a host update of that Service, so the two lanes
    /// never race on one load balancer and the recorded set matches the cloud's.
    lb_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Key → earliest node change its load balancer has not caught up with yet (latency metric).
    pub(super) node_change_since: Mutex<HashMap<String, tokio::time::Instant>>,
}

/// Why a [`ServiceController`] cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum NewServiceControllerError {
    /// Upstream skips the controller in this case; the caller reports "not started".
    #[error(
        "the cloud provider does not support load balancers; the service controller needs the LoadBalancer facet"
    )]
    LoadBalancerUnsupported,
}

/// The namespace and name of a `namespace/name` key.
pub(super) fn split_key(key: &str) -> Result<(&str, &str), ServiceSyncError> {
    match key.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns, name))
        }
        _ => Err(ServiceSyncError::InvalidKey(key.to_string())),
    }
}

/// The work-queue key of a Service.
pub fn service_key(svc: &Service) -> String {
    format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or_default(),
        svc.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The reference events about `svc` point at.
pub(super) fn service_ref(svc: &Service) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        namespace: svc.metadata.namespace.clone(),
        name: svc.metadata.name.clone(),
        uid: svc.metadata.uid.clone(),
        resource_version: svc.metadata.resource_version.clone(),
        ..Default::default()
    }
}

impl ServiceController {
    /// Builds the controller; fails when the cloud has no load balancers, as upstream `New`.
    pub fn new(
        cloud: Arc<dyn CloudProvider>,
        api: kube::Client,
        cluster_name: impl Into<String>,
        services: Arc<dyn ServiceLister>,
        nodes: Arc<dyn NodeLister>,
        events: Arc<dyn EventSink>,
    ) -> Result<Self, NewServiceControllerError> {
        if cloud.load_balancer().is_none() {
            return Err(NewServiceControllerError::LoadBalancerUnsupported);
        }
        Ok(Self {
            cloud,
            api,
            services,
            nodes,
            events,
            cluster_name: cluster_name.into(),
            metrics: ServiceMetrics::default(),
            service_cache: Mutex::default(),
            last_synced_nodes: Mutex::default(),
            eligible: EligibleNodeCache::default(),
            shutdown: CancellationToken::new(),
            lb_locks: Mutex::default(),
            node_change_since: Mutex::default(),
        })
    }

    /// Uses `metrics` (registered by the caller with [`ServiceMetrics::new`]) instead of
    /// unregistered ones.
    pub fn with_metrics(mut self, metrics: ServiceMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Lists the Nodes again only after `revision` moved (the Node handler bumps it on every
    /// event); without it, every node sync and ensure lists them.
    pub fn with_node_revision(mut self, revision: NodeRevision) -> Self {
        self.eligible = EligibleNodeCache::tracking(revision);
        self
    }

    /// Stops waiting out quota refusals in place once `shutdown` is cancelled.
    pub fn with_shutdown(mut self, shutdown: CancellationToken) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// The eligible node set now, shared.
    pub(super) fn eligible_nodes(&self) -> Arc<EligibleNodes> {
        self.eligible.current(&*self.nodes)
    }

    pub(super) fn lb(&self) -> Result<&dyn LoadBalancer, ServiceSyncError> {
        self.cloud
            .load_balancer()
            .ok_or(ServiceSyncError::LoadBalancerUnsupported)
    }

    /// The lock serializing cloud calls that set Service `key`'s backends.
    pub(super) fn lb_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.lb_locks
            .lock()
            .entry(key.to_string())
            .or_default()
            .clone()
    }

    /// Upstream's event once a Service's load balancer is gone.
    fn deleted_load_balancer(&self, svc: &Service) {
        self.event(
            svc,
            EventType::Normal,
            "DeletedLoadBalancer",
            "Deleted load balancer",
        );
    }

    pub(super) fn event(&self, svc: &Service, type_: EventType, reason: &str, message: &str) {
        self.events.emit(&service_ref(svc), type_, reason, message);
    }

    /// Which key, if any, a Service Add (`old == None`) or Update should enqueue; the informer
    /// handler's filter, so irrelevant updates never reach the queue.
    pub fn service_event_keys(old: Option<&Service>, new: &Service) -> Option<String> {
        let relevant = match old {
            None => wants_load_balancer(new) || needs_cleanup(new),
            Some(old) => needs_update(old, new) || needs_cleanup(new),
        };
        relevant.then(|| service_key(new))
    }

    /// Reconciles the load balancer of the Service `key` (`namespace/name`) once.
    #[tracing::instrument(skip_all, fields(controller = CONTROLLER_NAME, object.ref = %key))]
    pub async fn sync_service(&self, key: &str) -> Result<(), ServiceSyncError> {
        let (ns, name) = split_key(key)?;
        match self.services.get(ns, name) {
            None => self.process_service_deletion(key).await,
            Some(svc) => self.process_create_or_update(key, svc).await,
        }
    }

    /// The Service is gone from the cache: delete the load balancer of the last object we saw
    /// (covers Services that never had the finalizer).
    async fn process_service_deletion(&self, key: &str) -> Result<(), ServiceSyncError> {
        let Some(cached) = self.service_cache.lock().get(key).cloned() else {
            return Ok(());
        };
        tracing::info!(
            service = key,
            "service has been deleted; cleaning up its load balancer"
        );
        self.process_load_balancer_delete(&cached).await?;
        self.forget(key);
        Ok(())
    }

    fn forget(&self, key: &str) {
        self.service_cache.lock().remove(key);
        self.last_synced_nodes.lock().remove(key);
        self.lb_locks.lock().remove(key);
        self.node_change_since.lock().remove(key);
    }

    async fn process_create_or_update(
        &self,
        key: &str,
        svc: Arc<Service>,
    ) -> Result<(), ServiceSyncError> {
        let cached = self.service_cache.lock().get(key).cloned();
        if let Some(old) = cached
            && old.metadata.uid != svc.metadata.uid
        {
            // Deleted and recreated faster than we saw it; only possible without the finalizer.
            self.process_load_balancer_delete(&old).await?;
        }
        self.service_cache
            .lock()
            .insert(key.to_string(), svc.clone());
        match self.sync_load_balancer_if_needed(key, &svc).await {
            Err(err) => {
                self.event(
                    &svc,
                    EventType::Warning,
                    "SyncLoadBalancerFailed",
                    &format!("Error syncing load balancer: {err}"),
                );
                Err(err)
            }
            Ok(Operation::Delete) => {
                self.forget(key);
                Ok(())
            }
            Ok(Operation::Ensure) => Ok(()),
        }
    }

    /// Deletes the load balancer of a Service object we no longer track by finalizer.
    async fn process_load_balancer_delete(&self, svc: &Service) -> Result<(), ServiceSyncError> {
        if !wants_load_balancer(svc) {
            return Ok(());
        }
        self.event(
            svc,
            EventType::Normal,
            "DeletingLoadBalancer",
            "Deleting load balancer",
        );
        if let Err(err) = self
            .lb()?
            .ensure_load_balancer_deleted(&self.cluster_name, svc)
            .await
        {
            self.event(
                svc,
                EventType::Warning,
                "DeleteLoadBalancerFailed",
                &format!("Error deleting load balancer: {err}"),
            );
            return Err(ServiceSyncError::DeleteRemovedLoadBalancer(err));
        }
        self.deleted_load_balancer(svc);
        Ok(())
    }

    async fn sync_load_balancer_if_needed(
        &self,
        key: &str,
        svc: &Service,
    ) -> Result<Operation, ServiceSyncError> {
        // Safe difference from upstream: a Service with a deletionTimestamp is always cleaned up,
        // never ensured, so the finalizer is never re-added to it (cloud-provider-gcp #981).
        let deleting = svc.metadata.deletion_timestamp.is_some();
        let (op, new_status) = if !wants_load_balancer(svc) || needs_cleanup(svc) || deleting {
            self.delete_load_balancer(svc).await?;
            (Operation::Delete, LoadBalancerStatus::default())
        } else {
            match self.ensure_load_balancer(key, svc).await? {
                Some(status) => (Operation::Ensure, status),
                // Another controller implements this load balancer: nothing more to do.
                None => return Ok(Operation::Ensure),
            }
        };
        match patch::patch_lb_status(&self.api, svc, &new_status).await {
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                // The Service vanished right after its finalizer was removed.
                Ok(op)
            }
            Err(err) => Err(ServiceSyncError::UpdateStatus(err)),
            Ok(()) => Ok(op),
        }
    }

    /// The finalizer is removed only after the load balancer is known to be gone.
    async fn delete_load_balancer(&self, svc: &Service) -> Result<(), ServiceSyncError> {
        let lb = self.lb()?;
        let existing = lb
            .get_load_balancer(&self.cluster_name, svc)
            .await
            .map_err(ServiceSyncError::CheckExistsBeforeCleanup)?;
        if existing.is_some() {
            self.event(
                svc,
                EventType::Normal,
                "DeletingLoadBalancer",
                "Deleting load balancer",
            );
            match lb
                .ensure_load_balancer_deleted(&self.cluster_name, svc)
                .await
            {
                Ok(()) | Err(CloudError::ImplementedElsewhere) => {}
                Err(err) => return Err(ServiceSyncError::DeleteLoadBalancer(err)),
            }
        }
        patch::remove_finalizer(&self.api, svc)
            .await
            .map_err(ServiceSyncError::RemoveFinalizer)?;
        self.deleted_load_balancer(svc);
        Ok(())
    }

    /// `None` when another controller implements this load balancer.
    async fn ensure_load_balancer(
        &self,
        key: &str,
        svc: &Service,
    ) -> Result<Option<LoadBalancerStatus>, ServiceSyncError> {
        let lb = self.lb()?;
        self.event(
            svc,
            EventType::Normal,
            "EnsuringLoadBalancer",
            "Ensuring load balancer",
        );
        // The finalizer goes on before the cloud is called, so a load balancer can never exist
        // without it.
        patch::add_finalizer(&self.api, svc)
            .await
            .map_err(ServiceSyncError::AddFinalizer)?;
        let lock = self.lb_lock(key);
        let _serialized = lock.lock().await;
        let nodes = self.eligible_nodes();
        if nodes.nodes().is_empty() {
            self.event(
                svc,
                EventType::Warning,
                "UnAvailableLoadBalancer",
                "There are no available nodes for LoadBalancer",
            );
        }
        let result = lb
            .ensure_load_balancer(&self.cluster_name, svc, nodes.nodes())
            .await;
        if matches!(result, Ok(_) | Err(CloudError::ImplementedElsewhere)) {
            // Recorded only once the cloud took it (upstream records before the call, so a
            // failed ensure could hide a node change from the next node sync).
            self.last_synced_nodes.lock().insert(key.to_string(), nodes);
        }
        let status = match result {
            Ok(status) => status,
            Err(CloudError::ImplementedElsewhere) => {
                tracing::debug!(
                    service = key,
                    "load balancer implemented elsewhere; ignoring"
                );
                return Ok(None);
            }
            Err(err) => return Err(ServiceSyncError::EnsureLoadBalancer(err)),
        };
        self.event(
            svc,
            EventType::Normal,
            "EnsuredLoadBalancer",
            "Ensured load balancer",
        );
        Ok(Some(status))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ServiceSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::service::predicates::LOAD_BALANCER_CLEANUP_FINALIZER;

    fn svc(type_: &str, finalizer: bool, deleting: bool) -> Service {
        let mut s = Service {
            spec: Some(ServiceSpec {
                type_: Some(type_.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        s.metadata.namespace = Some("ns".into());
        s.metadata.name = Some("web".into());
        if finalizer {
            s.metadata.finalizers = Some(vec![LOAD_BALANCER_CLEANUP_FINALIZER.into()]);
        }
        if deleting {
            s.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        }
        s
    }

    /// Compile-time check: the wiring spawns these futures on a multi-threaded runtime.
    #[test]
    fn futures_are_send() {
        fn assert_send<T: Send>(_: T) {}
        fn check(ctl: &ServiceController) {
            assert_send(ctl.sync_service("a/b"));
            assert_send(ctl.sync_load_balancer_hosts("a/b"));
        }
        let _ = check;
    }

    #[test]
    fn service_event_keys_table() {
        let key = Some("ns/web".to_string());
        let lb = svc("LoadBalancer", false, false);
        let lb_fin = svc("LoadBalancer", true, false);
        let cases: Vec<(&str, Option<Service>, Service, Option<String>)> = vec![
            ("add LB", None, lb.clone(), key.clone()),
            ("add ClusterIP", None, svc("ClusterIP", false, false), None),
            (
                "add ClusterIP with finalizer (needs cleanup)",
                None,
                svc("ClusterIP", true, false),
                key.clone(),
            ),
            (
                "resync of settled LB",
                Some(lb_fin.clone()),
                lb_fin.clone(),
                None,
            ),
            (
                "resync of pending cleanup",
                Some(svc("LoadBalancer", true, true)),
                svc("LoadBalancer", true, true),
                key.clone(),
            ),
            (
                "type change",
                Some(lb_fin.clone()),
                svc("ClusterIP", true, false),
                key.clone(),
            ),
            (
                "ClusterIP label change",
                Some(svc("ClusterIP", false, false)),
                svc("ClusterIP", false, false),
                None,
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(
                ServiceController::service_event_keys(old.as_ref(), &new),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn split_key_table() {
        assert_eq!(split_key("ns/name").unwrap(), ("ns", "name"));
        for bad in ["", "name", "/name", "ns/", "a/b/c"] {
            assert!(
                matches!(split_key(bad), Err(ServiceSyncError::InvalidKey(_))),
                "{bad:?}"
            );
        }
    }
}
