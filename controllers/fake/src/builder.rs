//! Describing a fake cloud in code: the builder behind [`FakeCloud::builder`] and
//! [`FakeCloud::from_config`], which checks the same rules as the config file.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use cloud_controllers::cloud::check_provider_name;

use super::config_error::{ConfigError, SourceLine};
use super::ip_pool::IpPool;
use super::rate_limit::RateLimit;
use super::world::{self, Facets, FakeInstance, World};
use super::{FakeCloud, Method, PROVIDER_NAME};

/// Describes a fake cloud in code; the same rules as the config file apply at [`Self::build`].
#[derive(Clone, Debug)]
pub struct FakeCloudBuilder {
    provider_name: String,
    has_cluster_id: bool,
    adopt_unknown_nodes: bool,
    metadata_without_provider_id: bool,
    facets: Facets,
    instances: Vec<FakeInstance>,
    pool_cidrs: Vec<String>,
    pool_addresses: Vec<String>,
    clusters: BTreeMap<String, String>,
    latency: BTreeMap<Method, Duration>,
    rate_limit: Option<RateLimit>,
    call_log_file: Option<PathBuf>,
}

impl FakeCloud {
    /// Starts describing a cloud in code; [`FakeCloudBuilder::build`] validates it.
    pub fn builder() -> FakeCloudBuilder {
        FakeCloudBuilder::default()
    }
}

impl Default for FakeCloudBuilder {
    fn default() -> Self {
        Self {
            provider_name: PROVIDER_NAME.to_owned(),
            has_cluster_id: true,
            adopt_unknown_nodes: false,
            metadata_without_provider_id: false,
            facets: Facets::all(),
            instances: Vec::new(),
            pool_cidrs: Vec::new(),
            pool_addresses: Vec::new(),
            clusters: BTreeMap::new(),
            latency: BTreeMap::new(),
            rate_limit: None,
            call_log_file: None,
        }
    }
}

impl FakeCloudBuilder {
    /// Name used in provider IDs and logs (default `fake`).
    pub fn provider_name(mut self, name: impl Into<String>) -> Self {
        self.provider_name = name.into();
        self
    }

    /// What [`cloud_controllers::cloud::CloudProvider::has_cluster_id`] answers (default true), to test
    /// `--allow-untagged-cloud`.
    pub fn has_cluster_id(mut self, has: bool) -> Self {
        self.has_cluster_id = has;
        self
    }

    /// Makes any node name the cloud does not know a running instance on first lookup (default
    /// off), so `--dev` initializes whatever Nodes the cluster has. Adopted instances are
    /// re-adopted after [`FakeCloud::remove_instance`]; set [`super::InstanceState::Gone`] to
    /// make one disappear.
    pub fn adopt_unknown_nodes(mut self, adopt: bool) -> Self {
        self.adopt_unknown_nodes = adopt;
        self
    }

    /// Makes `InstanceMetadata` answer with an empty provider ID (default off), as InstancesV2
    /// providers that leave it to the kubelet's `--provider-id` do; lookups still use it.
    pub fn metadata_without_provider_id(mut self, omit: bool) -> Self {
        self.metadata_without_provider_id = omit;
        self
    }

    /// Which facets exist (default: all), to test that controllers report "not started".
    pub fn facets(mut self, facets: Facets) -> Self {
        self.facets = facets;
        self
    }

    /// Adds an instance; names and provider IDs must be unique.
    pub fn instance(mut self, instance: FakeInstance) -> Self {
        self.instances.push(instance);
        self
    }

    /// Adds the host addresses of `cidr` to the load-balancer IP pool.
    pub fn lb_pool_cidr(mut self, cidr: impl Into<String>) -> Self {
        self.pool_cidrs.push(cidr.into());
        self
    }

    /// Adds single addresses to the load-balancer IP pool.
    pub fn lb_pool_addresses<I, S>(mut self, addresses: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.pool_addresses
            .extend(addresses.into_iter().map(Into::into));
        self
    }

    /// Adds a cluster for the `Clusters` facet.
    pub fn cluster(mut self, name: impl Into<String>, master: impl Into<String>) -> Self {
        self.clusters.insert(name.into(), master.into());
        self
    }

    /// Every call of `method` takes `delay` before the cloud answers, as a real cloud's API does
    /// (see [`FakeCloud::set_latency`]).
    pub fn latency(mut self, method: Method, delay: Duration) -> Self {
        self.latency.insert(method, delay);
        self
    }

    /// Gives the cloud an API quota: over it, calls fail with [`cloud_controllers::cloud::CloudError::Retry`]
    /// (see [`FakeCloud::set_rate_limit`]).
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate_limit = Some(limit);
        self
    }

    /// Also appends every logged call to this file, one JSON object per line, with wall-clock
    /// times (`startedUnixMicros`, `finishedUnixMicros`): how a test of several processes, each
    /// with its own fake cloud, sees which process called what and when. Created if missing.
    pub fn call_log_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.call_log_file = Some(path.into());
        self
    }

    /// Validates the description and makes the cloud. Without any pool entry the pool is
    /// `192.0.2.0/24` (TEST-NET-1).
    pub fn build(self) -> Result<FakeCloud, ConfigError> {
        check_provider_name(&self.provider_name).map_err(|source| {
            ConfigError::InvalidProviderName {
                source,
                at: SourceLine::default(),
            }
        })?;
        if let Some(limit) = &self.rate_limit {
            limit
                .validate()
                .map_err(|source| ConfigError::InvalidRateLimit {
                    source,
                    at: SourceLine::default(),
                })?;
        }
        let pool = if self.pool_cidrs.is_empty() && self.pool_addresses.is_empty() {
            IpPool::default_pool()
        } else {
            IpPool::parse(&self.pool_cidrs, &self.pool_addresses)?
        };
        let mut world = World::new(&self.provider_name, pool);
        world.adopt_unknown_nodes = self.adopt_unknown_nodes;
        world.metadata_without_provider_id = self.metadata_without_provider_id;
        for instance in self.instances {
            let instance = instance.with_default_provider_id(&self.provider_name);
            world::validate_instance(&instance)?;
            if world.instance_by_name(&instance.name).is_some() {
                return Err(ConfigError::DuplicateInstanceName {
                    name: instance.name,
                    at: SourceLine::default(),
                });
            }
            if world
                .instance_by_provider_id(&instance.provider_id)
                .is_some()
            {
                return Err(ConfigError::DuplicateProviderId {
                    provider_id: instance.provider_id,
                    at: SourceLine::default(),
                });
            }
            world.upsert_instance(instance);
        }
        for (name, master) in self.clusters {
            if name.trim().is_empty() {
                return Err(ConfigError::EmptyClusterName {
                    at: SourceLine::default(),
                });
            }
            world.add_cluster(name, master);
        }
        let cloud =
            FakeCloud::from_parts(self.provider_name, self.has_cluster_id, self.facets, world);
        for (method, delay) in self.latency {
            cloud.set_latency(method, delay);
        }
        cloud.shared.quota.set(self.rate_limit);
        if let Some(path) = self.call_log_file {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|source| ConfigError::CallLogFile {
                    path: path.display().to_string(),
                    source,
                    at: SourceLine::default(),
                })?;
            cloud.shared.faults.set_sink(file);
        }
        Ok(cloud)
    }
}
