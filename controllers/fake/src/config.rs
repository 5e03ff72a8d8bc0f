//! The fake cloud's `--cloud-config` file: YAML describing the world it starts with.
//!
//! The format is shown in `example-cloud-config.yaml` next to this file (included in the docs of
//! [`super::FakeCloud::from_config`] and parsed by a test, so it stays true).
//!
//! Unknown fields are rejected, and every error says which field and line to fix; a parse error
//! never quotes a value or a line of the file (it may hold credentials in a real provider).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use cloud_controllers::cloud::{check_provider_name, parse_cloud_config};
use controller_manager::options::GoDuration;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::config_error::{ConfigError, SourceLine};
use super::ip_pool::IpPool;
use super::rate_limit::RateLimit;
use super::world::{self, Facets, FakeInstance, InstanceState};
use super::{FakeCloud, FakeCloudBuilder, Method, PROVIDER_NAME};
use k8s_openapi::api::core::v1::NodeAddress;

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    provider_name: Option<Spanned<String>>,
    #[serde(rename = "hasClusterID", default)]
    has_cluster_id: Option<bool>,
    #[serde(default)]
    adopt_unknown_nodes: bool,
    #[serde(default)]
    facets: Option<Facets>,
    #[serde(default)]
    instances: Vec<FileInstance>,
    #[serde(default)]
    load_balancer_pool: Option<FilePool>,
    #[serde(default)]
    clusters: Vec<FileCluster>,
    #[serde(default)]
    latency: HashMap<Spanned<String>, Spanned<String>>,
    #[serde(default)]
    rate_limit: Option<Spanned<FileRateLimit>>,
    #[serde(default)]
    call_log_file: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileRateLimit {
    qps: f64,
    #[serde(default)]
    burst: Option<u32>,
    #[serde(default)]
    methods: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileInstance {
    name: Spanned<String>,
    #[serde(rename = "providerID", default)]
    provider_id: Option<Spanned<String>>,
    #[serde(default)]
    instance_type: Option<String>,
    #[serde(default)]
    zone: String,
    #[serde(default)]
    region: String,
    #[serde(default)]
    addresses: Vec<FileAddress>,
    #[serde(default)]
    state: InstanceState,
    #[serde(default)]
    additional_labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAddress {
    #[serde(rename = "type")]
    type_: Spanned<String>,
    address: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePool {
    #[serde(default)]
    cidr: Option<Spanned<String>>,
    #[serde(default)]
    addresses: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCluster {
    name: Spanned<String>,
    #[serde(default)]
    master: String,
}

impl FakeCloud {
    /// Builds the cloud a `--cloud-config` file describes. Every key is optional; unknown
    /// fields are rejected and errors name the field and line. The format:
    ///
    #[doc = concat!("```yaml\n", include_str!("example-cloud-config.yaml"), "```")]
    pub fn from_config(yaml: &[u8]) -> Result<FakeCloud, ConfigError> {
        parse(yaml)?.build()
    }
}

/// Parses and validates a config file into a builder; [`FakeCloudBuilder::build`] finishes it.
pub(super) fn parse(yaml: &[u8]) -> Result<FakeCloudBuilder, ConfigError> {
    let file: FileConfig = if yaml.iter().all(u8::is_ascii_whitespace) {
        // An empty file means "all defaults", like no file at all.
        FileConfig::default()
    } else {
        // So does an empty document (`---`, only comments, `~`): it is YAML null.
        parse_cloud_config::<Option<FileConfig>>(yaml)?.unwrap_or_default()
    };

    let provider_name = match &file.provider_name {
        Some(name) => {
            check_provider_name(&name.value).map_err(|source| {
                ConfigError::InvalidProviderName {
                    source,
                    at: SourceLine::of(name),
                }
            })?;
            name.value.clone()
        }
        None => PROVIDER_NAME.to_owned(),
    };
    let mut builder = FakeCloudBuilder::default()
        .provider_name(provider_name.clone())
        .has_cluster_id(file.has_cluster_id.unwrap_or(true))
        .adopt_unknown_nodes(file.adopt_unknown_nodes)
        .facets(file.facets.unwrap_or_default());

    let mut names = BTreeSet::new();
    let mut provider_ids = BTreeSet::new();
    for inst in file.instances {
        let name = inst.name.value.clone();
        if name.trim().is_empty() {
            return Err(ConfigError::EmptyInstanceName {
                at: SourceLine::of(&inst.name),
            });
        }
        if !names.insert(name.clone()) {
            return Err(ConfigError::DuplicateInstanceName {
                name,
                at: SourceLine::of(&inst.name),
            });
        }
        let (provider_id, id_at) = match &inst.provider_id {
            Some(id) if !id.value.is_empty() => (id.value.clone(), SourceLine::of(id)),
            _ => (
                format!("{provider_name}://{name}"),
                SourceLine::of(&inst.name),
            ),
        };
        if !provider_ids.insert(provider_id.clone()) {
            return Err(ConfigError::DuplicateProviderId {
                provider_id,
                at: id_at,
            });
        }
        let mut addresses = Vec::with_capacity(inst.addresses.len());
        for a in inst.addresses {
            let address = NodeAddress {
                type_: a.type_.value.clone(),
                address: a.address.value.clone(),
            };
            let at = if world::ADDRESS_TYPES.contains(&address.type_.as_str()) {
                SourceLine::of(&a.address)
            } else {
                SourceLine::of(&a.type_)
            };
            world::validate_address(&name, &address, at)?;
            addresses.push(address);
        }
        builder = builder.instance(FakeInstance {
            name,
            provider_id,
            instance_type: inst
                .instance_type
                .unwrap_or_else(|| world::DEFAULT_INSTANCE_TYPE.to_owned()),
            zone: inst.zone,
            region: inst.region,
            addresses,
            state: inst.state,
            additional_labels: inst.additional_labels,
        });
    }

    if let Some(pool) = file.load_balancer_pool {
        // Parse here for line numbers; the builder parses the same strings again.
        IpPool::parse_at(
            pool.cidr
                .iter()
                .map(|c| (c.value.as_str(), SourceLine::of(c))),
            pool.addresses
                .iter()
                .map(|a| (a.value.as_str(), SourceLine::of(a))),
        )?;
        if let Some(cidr) = pool.cidr {
            builder = builder.lb_pool_cidr(cidr.value);
        }
        builder = builder.lb_pool_addresses(pool.addresses.into_iter().map(|a| a.value));
    }

    for cluster in file.clusters {
        if cluster.name.value.trim().is_empty() {
            return Err(ConfigError::EmptyClusterName {
                at: SourceLine::of(&cluster.name),
            });
        }
        builder = builder.cluster(cluster.name.value, cluster.master);
    }

    let mut latency: Vec<_> = file.latency.into_iter().collect();
    latency.sort_by_key(|(method, _)| method.referenced.line());
    for (method, value) in latency {
        let (method, delay) = parse_latency(&method, &value)?;
        builder = builder.latency(method, delay);
    }
    if let Some(limit) = file.rate_limit {
        builder = builder.rate_limit(parse_rate_limit(&limit)?);
    }
    if let Some(path) = file.call_log_file {
        if path.value.trim().is_empty() {
            return Err(ConfigError::CallLogFile {
                path: String::new(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path is empty"),
                at: SourceLine::of(&path),
            });
        }
        builder = builder.call_log_file(path.value);
    }
    Ok(builder)
}

fn parse_method(field: &'static str, name: &Spanned<String>) -> Result<Method, ConfigError> {
    Method::from_name(&name.value).ok_or_else(|| ConfigError::UnknownMethod {
        field,
        name: name.value.clone(),
        at: SourceLine::of(name),
    })
}

fn parse_latency(
    method: &Spanned<String>,
    value: &Spanned<String>,
) -> Result<(Method, Duration), ConfigError> {
    let parsed = parse_method("latency", method)?;
    let invalid = |reason: String| ConfigError::InvalidLatency {
        method: method.value.clone(),
        value: value.value.clone(),
        reason,
        at: SourceLine::of(value),
    };
    if parsed == Method::GetLoadBalancerName {
        return Err(invalid(
            "cannot apply: GetLoadBalancerName is synchronous and answers at once".to_owned(),
        ));
    }
    let delay = value
        .value
        .parse::<GoDuration>()
        .map_err(|e| invalid(format!("is not a duration: {e}")))?;
    Ok((parsed, delay.get()))
}

fn parse_rate_limit(limit: &Spanned<FileRateLimit>) -> Result<RateLimit, ConfigError> {
    let at = SourceLine::of(limit);
    let file = &limit.value;
    let methods = file
        .methods
        .iter()
        .map(|m| parse_method("rateLimit.methods", m))
        .collect::<Result<Vec<_>, _>>()?;
    // Like a Go `rate.Limiter` built from a QPS alone: a burst of one second's worth.
    let burst = file
        .burst
        .unwrap_or_else(|| file.qps.ceil().clamp(1.0, f64::from(u32::MAX)) as u32);
    let limit = RateLimit::new(file.qps, burst).methods(methods);
    limit
        .validate()
        .map_err(|source| ConfigError::InvalidRateLimit { source, at })?;
    Ok(limit)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
