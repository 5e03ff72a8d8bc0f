//! Why a node controller (cloud-node or cloud-node-lifecycle) cannot run on a cloud: the check
//! both make before they start, kept here so neither borrows it from the other.

use crate::cloud::CloudProvider;

/// Why the controller cannot be built; the manager reports the controller as not started.
#[derive(Debug, thiserror::Error)]
pub enum NodeControllerError {
    /// The provider has neither instances facet, so there is nothing to initialize nodes from.
    #[error(
        "cloud provider {provider} supports neither InstancesV2 nor Instances; the node controllers cannot run"
    )]
    NoInstances {
        /// The provider's name.
        provider: String,
    },
}

impl NodeControllerError {
    /// Fails when `cloud` has neither instances facet; both node controllers start with this.
    pub fn check(cloud: &dyn CloudProvider) -> Result<(), Self> {
        if cloud.instances_v2().is_none() && cloud.instances().is_none() {
            return Err(NodeControllerError::NoInstances {
                provider: cloud.provider_name().to_string(),
            });
        }
        Ok(())
    }
}
