//! The vocabulary the checks are written in: a check and its facet, the verdicts, and the
//! helpers that call a provider method, compare, and fail saying what came back.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;

use cloud_controllers::cloud::{CloudError, CloudProvider};

use crate::fixture::Fixture;
use crate::report::{CheckReport, Failure, Outcome};

/// How a check ends: `Err` is a broken rule; `Ok` is passed or skipped.
pub(crate) type Verdict = Result<Outcome, Failure>;

/// A running check.
pub(crate) type CheckFuture<'a> = Pin<Box<dyn Future<Output = Verdict> + Send + 'a>>;

type CheckFn = for<'a> fn(&'a dyn CloudProvider, &'a Fixture) -> CheckFuture<'a>;

/// The facet a check needs; without it the check is skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Facet {
    /// The provider itself (always there).
    Provider,
    /// `load_balancer()`.
    LoadBalancer,
    /// `instances_v2()`.
    InstancesV2,
    /// `instances()`, the legacy API.
    Instances,
    /// `zones()`, the legacy zone lookups.
    Zones,
    /// `routes()`.
    Routes,
}

impl Facet {
    /// Why checks of this facet are skipped on `provider`, if they are.
    fn missing(self, provider: &dyn CloudProvider) -> Option<String> {
        let (present, accessor) = match self {
            Facet::Provider => return None,
            Facet::LoadBalancer => (provider.load_balancer().is_some(), "load_balancer()"),
            Facet::InstancesV2 => (provider.instances_v2().is_some(), "instances_v2()"),
            Facet::Instances => (provider.instances().is_some(), "instances()"),
            Facet::Zones => (provider.zones().is_some(), "zones()"),
            Facet::Routes => (provider.routes().is_some(), "routes()"),
        };
        (!present).then(|| format!("the provider does not support it ({accessor} is None)"))
    }
}

/// One rule and the code that checks it.
pub struct Check {
    /// Its name, which says what a provider must do.
    pub name: &'static str,
    /// The facet it needs.
    pub facet: Facet,
    /// The upstream rule it enforces, and where upstream states it.
    pub rule: &'static str,
    run: CheckFn,
}

impl Check {
    /// Runs the check on `provider` (skipped when the facet is missing).
    pub async fn run(&self, provider: &dyn CloudProvider, fixture: &Fixture) -> CheckReport {
        let outcome = match self.facet.missing(provider) {
            Some(why) => Outcome::Skipped(why),
            None => (self.run)(provider, fixture)
                .await
                .unwrap_or_else(Outcome::Failed),
        };
        CheckReport {
            name: self.name,
            rule: self.rule,
            outcome,
        }
    }
}

impl Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check")
            .field("name", &self.name)
            .field("facet", &self.facet)
            .finish_non_exhaustive()
    }
}

/// A [`Check`] from the async fn `$name(provider, fixture) -> Verdict` in scope, named after it.
macro_rules! check {
    ($name:ident, $facet:ident, $rule:expr) => {
        $crate::checks::Check::new(
            stringify!($name),
            $crate::checks::Facet::$facet,
            $rule,
            |p, f| Box::pin($name(p, f)),
        )
    };
}
pub(crate) use check;

impl Check {
    pub(crate) const fn new(
        name: &'static str,
        facet: Facet,
        rule: &'static str,
        run: CheckFn,
    ) -> Self {
        Check {
            name,
            facet,
            rule,
            run,
        }
    }
}

// ---- the vocabulary checks are written in ----

/// The check passed.
pub(crate) fn passed() -> Verdict {
    Ok(Outcome::Passed)
}

/// The check could not run on this fixture, and why.
pub(crate) fn skipped(why: impl Into<String>) -> Verdict {
    Ok(Outcome::Skipped(why.into()))
}

/// The value of a provider call that must succeed, or the failure naming `call` and its error.
pub(crate) fn called<T>(call: &str, result: Result<T, CloudError>) -> Result<T, Failure> {
    result.map_err(|err| Failure::new(format!("{call} to succeed"), describe(&err)))
}

/// `Ok` when `holds`, else the failure saying what was `expected` and what the provider returned.
pub(crate) fn expect(
    holds: bool,
    expected: impl Into<String>,
    got: impl Debug,
) -> Result<(), Failure> {
    if holds {
        Ok(())
    } else {
        Err(Failure::new(expected, format!("{got:?}")))
    }
}

/// A provider call's answer as the failure shows it: `Ok(value)`, or the error with its variant.
pub(crate) fn answer<T: Debug>(result: &Result<T, CloudError>) -> Shown {
    Shown(match result {
        Ok(value) => format!("Ok({value:?})"),
        Err(err) => describe(err),
    })
}

/// Text shown as it is in a failure's `got`.
pub(crate) struct Shown(String);

impl Debug for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A provider's error with its variant, since controllers branch on the variant.
pub(crate) fn describe(err: &CloudError) -> String {
    let variant = match err {
        CloudError::InstanceNotFound => "InstanceNotFound",
        CloudError::NotImplemented => "NotImplemented",
        CloudError::ImplementedElsewhere => "ImplementedElsewhere",
        CloudError::Retry { .. } => "Retry",
        CloudError::Other(_) => "Other",
    };
    format!("Err(CloudError::{variant}: {err})")
}

/// The facet a gated check runs on; the provider may drop a facet at run time, which fails.
pub(crate) fn facet<'a, T: ?Sized>(facet: Option<&'a T>, accessor: &str) -> Result<&'a T, Failure> {
    facet.ok_or_else(|| Failure::new(format!("{accessor} to stay Some during the run"), "None"))
}

/// The address types a Node's `status.addresses` may hold (core/v1 `NodeAddressType`).
const ADDRESS_TYPES: [&str; 5] = [
    "Hostname",
    "InternalIP",
    "ExternalIP",
    "InternalDNS",
    "ExternalDNS",
];

/// At least one address, each with a known type and a value (an IP for the `*IP` types).
pub(crate) fn typed_addresses(
    call: &str,
    addresses: &[k8s_openapi::api::core::v1::NodeAddress],
) -> Result<(), Failure> {
    let bad = |a: &&k8s_openapi::api::core::v1::NodeAddress| {
        !ADDRESS_TYPES.contains(&a.type_.as_str())
            || a.address.is_empty()
            || (a.type_.ends_with("IP") && a.address.parse::<std::net::IpAddr>().is_err())
    };
    expect(
        !addresses.is_empty(),
        format!("{call} to return the instance's addresses (at least one)"),
        addresses,
    )?;
    match addresses.iter().find(bad) {
        None => Ok(()),
        Some(a) => Err(Failure::new(
            format!(
                "{call} to return addresses typed {ADDRESS_TYPES:?}, each with a value (an IP address for the *IP types)"
            ),
            format!("{a:?}"),
        )),
    }
}
