//! The cloud provider contract: what a cloud must offer for the cloud controllers to run on it.
//!
//! Modelled on upstream `k8s.io/cloud-provider`'s `cloudprovider.Interface`. A provider implements
//! only the facets its cloud has; each accessor returns `None` by default, and the controller that
//! needs a missing facet reports "not started" instead of running. Providers register a factory
//! under a name in a [`CloudProviderRegistry`]; `--cloud-provider=NAME` picks one.

mod error;
mod provider;
mod provider_name;
mod registry;
mod types;

/// A provider's `--cloud-config` parser: errors name the key path, line and column, never a
/// value or a line of the file (the framework's one redacting YAML parser).
pub use controller_manager::config_file::{
    ConfigFileError, FilePosition, parse_yaml as parse_cloud_config,
};
pub use error::{BoxError, CloudError};
pub use provider::{
    CloudProvider, Clusters, InitializeContext, Instances, InstancesV2, LoadBalancer, Routes,
    Zones, instance_provider_id,
};
pub use provider_name::{MAX_PROVIDER_NAME, ProviderNameError, Truncated, check_provider_name};
pub use registry::{CloudProviderRegistry, ProviderFactory, RegistryError};
pub use types::{InstanceMetadata, Route, Zone};

// Tracing and metrics around any provider (kept apart so the list above stays the contract).
mod instrumented;
pub use instrumented::{
    BUDGET_WAIT_BUCKETS, BudgetOptions, CLOUD_LATENCY_BUCKETS, CallProvider, CloudBudget,
    CloudCallLabels, CloudFuture, CloudLatencyLabels, CloudMetrics, CloudRequest,
    InstrumentedCloud, MAX_QPS, MIN_QPS, qps_in_range,
};
