//! Why a service sync failed, with the upstream wording, and whether the cloud asked for a fixed
//! retry delay.

use std::time::Duration;

use crate::cloud::CloudError;
use crate::wiring::RetryHint;

/// A failed `sync_service`; the caller requeues after the cloud's `Retry { after }`
/// ([`RetryHint`]) when set, else with exponential backoff.
#[derive(Debug, thiserror::Error)]
pub enum ServiceSyncError {
    /// The queue key is not `namespace/name`.
    #[error("invalid service key {0:?}: expected namespace/name")]
    InvalidKey(String),
    /// The cloud has no load-balancer facet; the controller should not have been started.
    #[error("the cloud provider does not support load balancers")]
    LoadBalancerUnsupported,
    /// `GetLoadBalancer` failed, so the controller cannot tell whether cleanup is needed.
    #[error("failed to check if load balancer exists before cleanup: {0}")]
    CheckExistsBeforeCleanup(#[source] CloudError),
    /// `EnsureLoadBalancerDeleted` failed in the finalizer path; the finalizer stays.
    #[error("failed to delete load balancer: {0}")]
    DeleteLoadBalancer(#[source] CloudError),
    /// `EnsureLoadBalancerDeleted` failed for a Service that is gone (or was recreated) and had
    /// no finalizer; the cached object is kept so the delete is retried.
    #[error("failed to delete load balancer of removed service: {0}")]
    DeleteRemovedLoadBalancer(#[source] CloudError),
    /// Patching the finalizer away failed.
    #[error("failed to remove load balancer cleanup finalizer: {0}")]
    RemoveFinalizer(#[source] kube::Error),
    /// Patching the finalizer on failed; the cloud was not called.
    #[error("failed to add load balancer cleanup finalizer: {0}")]
    AddFinalizer(#[source] kube::Error),
    /// `EnsureLoadBalancer` failed.
    #[error("failed to ensure load balancer: {0}")]
    EnsureLoadBalancer(#[source] CloudError),
    /// Writing `status.loadBalancer` failed for a reason other than the Service being gone.
    #[error("failed to update load balancer status: {0}")]
    UpdateStatus(#[source] kube::Error),
}

impl RetryHint for ServiceSyncError {
    fn retry_after(&self) -> Option<Duration> {
        self.cloud_error().and_then(CloudError::retry_after)
    }
}

impl ServiceSyncError {
    /// The cloud error behind this failure, if the cloud caused it.
    pub fn cloud_error(&self) -> Option<&CloudError> {
        match self {
            Self::CheckExistsBeforeCleanup(e)
            | Self::DeleteLoadBalancer(e)
            | Self::DeleteRemovedLoadBalancer(e)
            | Self::EnsureLoadBalancer(e) => Some(e),
            _ => None,
        }
    }
}

/// A node-triggered backend update the cloud did not accept; the node-sync lane retries the
/// Service after the cloud's `Retry { after }` when set, else with exponential backoff, and
/// the Service's recorded node set stays what the cloud last accepted.
#[derive(Debug, thiserror::Error)]
#[error("failed to update load balancer hosts: {0}")]
pub struct UpdateHostsError(#[source] pub CloudError);

impl RetryHint for UpdateHostsError {
    fn retry_after(&self) -> Option<Duration> {
        self.0.retry_after()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_survives_wrapping() {
        let retry = || CloudError::Retry {
            message: "busy".into(),
            after: Duration::from_secs(7),
        };
        for err in [
            ServiceSyncError::EnsureLoadBalancer(retry()),
            ServiceSyncError::DeleteLoadBalancer(retry()),
            ServiceSyncError::CheckExistsBeforeCleanup(retry()),
            ServiceSyncError::DeleteRemovedLoadBalancer(retry()),
        ] {
            assert_eq!(err.retry_after(), Some(Duration::from_secs(7)), "{err}");
        }
        let plain = ServiceSyncError::EnsureLoadBalancer(CloudError::other("boom"));
        assert_eq!(plain.retry_after(), None);
        assert_eq!(plain.to_string(), "failed to ensure load balancer: boom");
        assert_eq!(ServiceSyncError::InvalidKey("x".into()).retry_after(), None);
    }
}
