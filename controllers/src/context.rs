//! What every cloud controller's initializer gets besides the framework's context: the provider,
//! the cloud flags and the feature gates.

use std::sync::Arc;

use controller_manager::options::FeatureGates;

use crate::cloud::CloudProvider;
use crate::options::CloudOptions;

/// The embedder context of the cloud controllers (`InitContext<CloudContext>::extra`).
pub struct CloudContext {
    /// The provider picked with `--cloud-provider`, usually wrapped in `InstrumentedCloud`.
    pub cloud: Arc<dyn CloudProvider>,
    /// The cloud controller flags.
    pub options: CloudOptions,
    /// `--feature-gates` (e.g. the watch-based route reconciliation).
    pub feature_gates: FeatureGates,
}

impl CloudContext {
    /// Bundles a provider with the flags its controllers run under.
    pub fn new(cloud: Arc<dyn CloudProvider>, options: CloudOptions) -> Self {
        CloudContext {
            cloud,
            options,
            feature_gates: FeatureGates::default(),
        }
    }

    /// Runs the controllers under `gates` instead of every gate's default.
    pub fn with_feature_gates(mut self, gates: FeatureGates) -> Self {
        self.feature_gates = gates;
        self
    }
}
