//! The three Lease calls the elector makes, behind a trait so the algorithm can be driven by
//! injected lease states (expired, fresh, conflicting) under a paused clock, as client-go's tests do.

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;

/// Reads and conditionally writes one Lease.
pub(crate) trait LeaseStore: Send + Sync {
    /// The lease, or `None` if it does not exist yet.
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, kube::Error>>;
    /// Creates the lease; fails with 409 if another replica created it first.
    fn create(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, kube::Error>>;
    /// Replaces the lease if its resourceVersion is still current; 409 means someone else wrote it.
    fn replace(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, kube::Error>>;
}

/// The real store: `Api<Lease>` in the lease namespace.
pub(crate) struct KubeLeaseStore {
    pub(crate) api: Api<Lease>,
    pub(crate) name: String,
}

impl KubeLeaseStore {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
        }
    }
}

impl LeaseStore for KubeLeaseStore {
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, kube::Error>> {
        Box::pin(self.api.get_opt(&self.name))
    }

    fn create(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, kube::Error>> {
        Box::pin(async move { self.api.create(&PostParams::default(), &lease).await })
    }

    fn replace(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await
        })
    }
}
