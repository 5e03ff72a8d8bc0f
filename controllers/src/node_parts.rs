//! What both node controllers (cloud-node and cloud-node-lifecycle) are built from, and the
//! check both make before they start, kept here so neither borrows it from the other.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::Api;

use crate::cloud::CloudProvider;
use crate::event_sink::EventSink;
use crate::listers::NodeLister;

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

/// The cloud, the Node API, the cached Nodes and where events go: what a node controller works
/// with, checked to have an instances facet.
pub struct NodeParts {
    pub(crate) cloud: Arc<dyn CloudProvider>,
    pub(crate) api: Api<Node>,
    pub(crate) lister: Arc<dyn NodeLister>,
    pub(crate) events: Arc<dyn EventSink>,
}

impl NodeParts {
    /// Fails when the provider has no instances facet, as upstream refuses to construct either
    /// node controller then.
    pub fn new(
        cloud: Arc<dyn CloudProvider>,
        api: Api<Node>,
        lister: Arc<dyn NodeLister>,
        events: Arc<dyn EventSink>,
    ) -> Result<Self, NodeControllerError> {
        NodeControllerError::check(cloud.as_ref())?;
        Ok(Self {
            cloud,
            api,
            lister,
            events,
        })
    }
}
