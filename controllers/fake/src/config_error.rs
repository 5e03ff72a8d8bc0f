//! Why a fake cloud description was rejected ([`ConfigError`]) and the config-file line it points
//! at ([`SourceLine`]): the bottom of the fake cloud's files, shared by the config parser, the
//! world's validation and the address pool.

use std::fmt;

use cloud_controllers::cloud::{ConfigFileError, ProviderNameError};
use serde_saphyr::Spanned;

use super::Method;
use super::rate_limit::RateLimitError;

/// The config-file line a [`ConfigError`] points at, so the message says where to look;
/// `None` for clouds built in code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceLine(pub Option<u64>);

impl SourceLine {
    pub(super) fn of<T>(spanned: &Spanned<T>) -> Self {
        SourceLine(Some(spanned.referenced.line()))
    }
}

impl fmt::Display for SourceLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(line) => write!(f, " (line {line})"),
            None => Ok(()),
        }
    }
}

/// Why a fake cloud description was rejected; each message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The YAML does not parse or does not match the format (unknown field, bad state, ...); the
    /// message names the key and line, never the value.
    #[error("invalid fake cloud config: {0}")]
    Yaml(#[from] ConfigFileError),
    /// `providerName` breaks the provider-name rule (empty, a slash, a space, too long, ...).
    #[error("providerName{at}: {source} (omit it for the default \"fake\")")]
    InvalidProviderName {
        /// Which rule, with the name cut to 64 characters.
        source: ProviderNameError,
        /// Where.
        at: SourceLine,
    },
    /// `callLogFile` cannot be opened for appending.
    #[error("callLogFile{at}: cannot open {path:?} for appending: {source}")]
    CallLogFile {
        /// The path as given.
        path: String,
        /// Why.
        source: std::io::Error,
        /// Where.
        at: SourceLine,
    },
    /// An instance has an empty `name`.
    #[error("instance name must not be empty{at}")]
    EmptyInstanceName {
        /// Where.
        at: SourceLine,
    },
    /// Two instances share a `name`.
    #[error("duplicate instance name {name:?}{at}: node names must be unique")]
    DuplicateInstanceName {
        /// The repeated name.
        name: String,
        /// Where the second one is.
        at: SourceLine,
    },
    /// Two instances share a `providerID`.
    #[error("duplicate providerID {provider_id:?}{at}: provider IDs must be unique")]
    DuplicateProviderId {
        /// The repeated provider ID.
        provider_id: String,
        /// Where the second one is.
        at: SourceLine,
    },
    /// An address `type` Kubernetes does not know.
    #[error(
        "instance {instance:?}: address type {type_:?}{at} is not one of Hostname, InternalIP, ExternalIP, InternalDNS, ExternalDNS"
    )]
    InvalidAddressType {
        /// The instance.
        instance: String,
        /// The bad type.
        type_: String,
        /// Where.
        at: SourceLine,
    },
    /// An `InternalIP` / `ExternalIP` address that is not an IP.
    #[error("instance {instance:?}: address {address:?}{at} is not an IP address")]
    InvalidNodeAddress {
        /// The instance.
        instance: String,
        /// The bad address.
        address: String,
        /// Where.
        at: SourceLine,
    },
    /// `loadBalancerPool.cidr` does not parse.
    #[error("loadBalancerPool.cidr {cidr:?}{at} is invalid: {reason}")]
    InvalidCidr {
        /// The bad CIDR.
        cidr: String,
        /// What is wrong with it.
        reason: String,
        /// Where.
        at: SourceLine,
    },
    /// An entry of `loadBalancerPool.addresses` is not an IP.
    #[error("loadBalancerPool.addresses: {address:?}{at} is not an IP address")]
    InvalidPoolAddress {
        /// The bad address.
        address: String,
        /// Where.
        at: SourceLine,
    },
    /// `loadBalancerPool` is present but empty.
    #[error(
        "loadBalancerPool has neither cidr nor addresses: give one, or omit loadBalancerPool for the default 192.0.2.0/24"
    )]
    EmptyPool,
    /// A cluster has an empty name.
    #[error("clusters: name must not be empty{at}")]
    EmptyClusterName {
        /// Where.
        at: SourceLine,
    },
    /// A `latency` key or `rateLimit.methods` entry is not a method of the provider contract.
    #[error(
        "{field}: {name:?}{at} is not a cloud provider method; use the upstream name, one of {}",
        method_names()
    )]
    UnknownMethod {
        /// `latency` or `rateLimit.methods`.
        field: &'static str,
        /// The name given.
        name: String,
        /// Where.
        at: SourceLine,
    },
    /// A `latency` value is not a duration, or names the synchronous `GetLoadBalancerName`.
    #[error("latency of {method}: {value:?}{at} {reason}")]
    InvalidLatency {
        /// The method.
        method: String,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
        /// Where.
        at: SourceLine,
    },
    /// `rateLimit` has a rate or burst that can let nothing through.
    #[error("{source}{at}")]
    InvalidRateLimit {
        /// What is wrong.
        source: RateLimitError,
        /// Where.
        at: SourceLine,
    },
}

fn method_names() -> String {
    Method::ALL.map(Method::as_str).join(", ")
}
