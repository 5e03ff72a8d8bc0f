//! Typed cloud errors, so controllers can tell "gone" from "not supported" from "try later".

use std::sync::Arc;
use std::time::Duration;

/// A boxed error from a provider's own client library.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a cloud call failed; controllers branch on the variant, as upstream compares sentinels.
///
/// `Clone`, so a test double or a cache can hand the same failure out twice; the provider's own
/// error in [`CloudError::Other`] is shared, with its chain of sources, not copied as text.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CloudError {
    /// The instance does not exist in the cloud (upstream `cloudprovider.InstanceNotFound`).
    #[error("instance not found")]
    InstanceNotFound,
    /// The provider does not implement this call (upstream `cloudprovider.NotImplemented`).
    #[error("unimplemented")]
    NotImplemented,
    /// Another controller owns this load balancer type (upstream `cloudprovider.ImplementedElsewhere`).
    #[error("implemented by alternate to cloud provider")]
    ImplementedElsewhere,
    /// The cloud asked to be called again after a fixed delay (upstream `api.RetryError`); the
    /// caller requeues after exactly `after` instead of backing off exponentially.
    #[error("{message} (retry after {after:?})")]
    Retry {
        /// What the cloud said.
        message: String,
        /// How long to wait before the next attempt.
        after: Duration,
    },
    /// Anything else the cloud reported.
    #[error(transparent)]
    Other(Arc<dyn std::error::Error + Send + Sync + 'static>),
}

impl CloudError {
    /// Wraps any message or error as [`CloudError::Other`].
    pub fn other(err: impl Into<BoxError>) -> Self {
        CloudError::Other(Arc::from(err.into()))
    }

    /// The fixed delay the cloud asked for, if this is a [`CloudError::Retry`].
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            CloudError::Retry { after, .. } => Some(*after),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("HTTP 500 from the compute API")]
    struct ApiError(#[source] std::io::Error);

    /// A clone shares the provider's error: same text, same chain of sources.
    #[test]
    fn a_clone_keeps_the_source_chain() {
        let err = CloudError::other(ApiError(std::io::Error::other("connection reset")));
        let clone = err.clone();
        assert_eq!(clone.to_string(), "HTTP 500 from the compute API");
        let CloudError::Other(inner) = &clone else {
            panic!("not Other: {clone:?}")
        };
        assert!(inner.downcast_ref::<ApiError>().is_some());
        let io = std::error::Error::source(&clone).expect("the io error");
        assert_eq!(io.to_string(), "connection reset");
    }
}
