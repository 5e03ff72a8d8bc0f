//! What every cloud controller's initializer gets besides the framework's context: the provider
//! and the cloud flags.

use std::sync::Arc;

use crate::cloud::CloudProvider;
use crate::options::CloudOptions;

/// The embedder context of the cloud controllers (`InitContext<CloudContext>::extra`).
pub struct CloudContext {
    /// The provider picked with `--cloud-provider`, usually wrapped in `InstrumentedCloud`.
    pub cloud: Arc<dyn CloudProvider>,
    /// The cloud controller flags.
    pub options: CloudOptions,
}

impl CloudContext {
    /// Bundles a provider with the flags its controllers run under.
    pub fn new(cloud: Arc<dyn CloudProvider>, options: CloudOptions) -> Self {
        CloudContext { cloud, options }
    }
}
