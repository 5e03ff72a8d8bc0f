//! The `AddressPool` custom resource (`addresspools.metal.example.com`, cluster-scoped), modelled
//! on MetalLB's `IPAddressPool`: CIDRs and ranges a LoadBalancer Service may get its ingress IP
//! from, and whether Services get one without asking for the pool by name.
//!
//! Also owns reading the addresses ([`AddressRange`]) and deciding which pools may hand them out
//! ([`usable`]): the allocator and the status controller ask the same function, so a pool the
//! status calls Overlapping is never allocated from, whatever the status write's latency.

use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The Service annotation that picks a pool by name (MetalLB's is `metallb.io/address-pool`).
pub const POOL_ANNOTATION: &str = "metal.example.com/address-pool";

/// Where LoadBalancer ingress IPs may come from.
// Each `printcolumn(..)` repeats the same keys, which clippy mistakes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "metal.example.com",
    version = "v1alpha1",
    kind = "AddressPool",
    plural = "addresspools",
    shortname = "apool",
    status = "AddressPoolStatus",
    doc = "A pool of addresses for LoadBalancer Services, handed out by metal-ccm's address-pool controller.",
    printcolumn(
        name = "Auto-Assign",
        type_ = "boolean",
        json_path = ".spec.autoAssign"
    ),
    printcolumn(name = "Allocated", type_ = "integer", json_path = ".status.allocated"),
    printcolumn(name = "Free", type_ = "integer", json_path = ".status.free"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AddressPoolSpec {
    /// CIDRs (`192.0.2.0/28`, `2001:db8::/120`) and inclusive ranges (`192.0.2.10-192.0.2.20`).
    pub addresses: Vec<String>,
    /// Whether Services without the `metal.example.com/address-pool` annotation may get an
    /// address from this pool. Pools are tried in name order.
    #[serde(default = "auto_assign_default")]
    pub auto_assign: bool,
}

fn auto_assign_default() -> bool {
    true
}

/// What the address-pool controller observed.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddressPoolStatus {
    /// LoadBalancer Services holding an address of this pool.
    pub allocated: u64,
    /// Addresses still free (saturates at 2^64-1 for large IPv6 pools).
    pub free: u64,
    /// `Ready` (addresses can be handed out) and `Overlapping` (refused: shares addresses with
    /// a pool created before it), each with the observedGeneration it was computed for.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// One contiguous span of addresses of one family, as integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressRange {
    v6: bool,
    first: u128,
    last: u128,
}

impl AddressRange {
    /// Reads `a.b.c.d/len`, `a.b.c.d-e.f.g.h` or one address; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let ip = |s: &str| {
            s.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("{s:?} in {text:?} is not an IP address"))
        };
        if let Some((addr, len)) = text.split_once('/') {
            let addr = ip(addr)?;
            let bits = if addr.is_ipv6() { 128 } else { 32 };
            let len: u32 = len
                .parse()
                .ok()
                .filter(|l| *l <= bits)
                .ok_or_else(|| format!("{text:?} has no prefix length between 0 and {bits}"))?;
            let host_bits = bits - len;
            let mask = if host_bits == 128 {
                u128::MAX
            } else {
                (1u128 << host_bits) - 1
            };
            let n = to_int(addr);
            return Ok(Self {
                v6: addr.is_ipv6(),
                first: n & !mask,
                last: n | mask,
            });
        }
        let (first, last) = match text.split_once('-') {
            Some((a, b)) => (ip(a)?, ip(b)?),
            None => (ip(text)?, ip(text)?),
        };
        if first.is_ipv6() != last.is_ipv6() {
            return Err(format!("{text:?} mixes IPv4 and IPv6"));
        }
        let (a, b) = (to_int(first), to_int(last));
        if a > b {
            return Err(format!("{text:?} ends before it starts"));
        }
        Ok(Self {
            v6: first.is_ipv6(),
            first: a,
            last: b,
        })
    }

    /// Whether `ip` lies in this range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv6() == self.v6 && (self.first..=self.last).contains(&to_int(ip))
    }

    /// Whether the two ranges share an address.
    pub fn overlaps(&self, other: &AddressRange) -> bool {
        self.v6 == other.v6 && self.first <= other.last && other.first <= self.last
    }

    /// Number of addresses, saturating.
    pub fn len(&self) -> u64 {
        u64::try_from(self.last - self.first).map_or(u64::MAX, |n| n.saturating_add(1))
    }

    /// Always false: a range holds at least one address.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The addresses in order.
    pub fn iter(&self) -> impl Iterator<Item = IpAddr> + '_ {
        (self.first..=self.last).map(|n| from_int(self.v6, n))
    }
}

fn to_int(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_int(v6: bool, n: u128) -> IpAddr {
    if v6 {
        IpAddr::V6(n.into())
    } else {
        // In range by construction: a v4 range only holds values below 2^32.
        IpAddr::V4(u32::try_from(n).unwrap_or(u32::MAX).into())
    }
}

/// Why a pool hands out nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// An entry of `spec.addresses` cannot be read.
    Invalid(String),
    /// It shares addresses with `with`, which was created first (or, created together, sorts first).
    Overlapping {
        /// The pool it collides with.
        with: String,
    },
}

/// The pool's ranges if it may hand out addresses; else why not. Of two overlapping pools the
/// older one (creation time, then name) stays usable, so adding a bad pool never takes addresses
/// away from Services of a good one.
pub fn usable(pool: &AddressPool, all: &[Arc<AddressPool>]) -> Result<Vec<AddressRange>, Refusal> {
    let ranges = ranges(pool).map_err(Refusal::Invalid)?;
    let seniority = |p: &AddressPool| (p.creation_timestamp().map(|t| t.0), p.name_any());
    let older = all
        .iter()
        .filter(|other| seniority(other) < seniority(pool))
        .filter_map(|other| Some((other, ranges_of_valid(other)?)));
    for (other, theirs) in older {
        if ranges.iter().any(|r| theirs.iter().any(|t| r.overlaps(t))) {
            return Err(Refusal::Overlapping {
                with: other.name_any(),
            });
        }
    }
    Ok(ranges)
}

fn ranges_of_valid(pool: &AddressPool) -> Option<Vec<AddressRange>> {
    ranges(pool).ok()
}

/// Every entry of `spec.addresses`, read.
pub fn ranges(pool: &AddressPool) -> Result<Vec<AddressRange>, String> {
    if pool.spec.addresses.is_empty() {
        return Err("spec.addresses is empty: list at least one CIDR or range".into());
    }
    pool.spec
        .addresses
        .iter()
        .map(|a| AddressRange::parse(a))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pool(name: &str, created: &str, addresses: &[&str]) -> Arc<AddressPool> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "metal.example.com/v1alpha1", "kind": "AddressPool",
                "metadata": {"name": name, "creationTimestamp": created},
                "spec": {"addresses": addresses},
            }))
            .unwrap(),
        )
    }

    #[test]
    fn cidrs_ranges_and_single_addresses() {
        let cidr = AddressRange::parse("192.0.2.0/30").unwrap();
        let ips: Vec<String> = cidr.iter().map(|i| i.to_string()).collect();
        assert_eq!(ips, ["192.0.2.0", "192.0.2.1", "192.0.2.2", "192.0.2.3"]);
        let range = AddressRange::parse("192.0.2.3 - 192.0.2.9").unwrap();
        assert_eq!(range.len(), 7);
        assert!(range.overlaps(&cidr) && range.contains("192.0.2.9".parse().unwrap()));
        assert_eq!(AddressRange::parse("198.51.100.7").unwrap().len(), 1);
        let v6 = AddressRange::parse("2001:db8::/64").unwrap();
        assert_eq!(v6.len(), u64::MAX, "saturates");
        assert!(!v6.overlaps(&cidr), "families never overlap");
        for (bad, why) in [
            ("192.0.2.0/33", "prefix length"),
            ("192.0.2.9-192.0.2.1", "ends before"),
            ("nope", "not an IP"),
            ("192.0.2.1-2001:db8::1", "mixes"),
        ] {
            let err = AddressRange::parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn the_younger_of_two_overlapping_pools_is_refused() {
        let a = pool("a", "2026-01-01T00:00:00Z", &["192.0.2.0/29"]);
        let b = pool("b", "2026-01-02T00:00:00Z", &["198.51.100.0/29"]);
        let c = pool("c", "2026-01-03T00:00:00Z", &["192.0.2.4-192.0.2.20"]);
        let bad = pool("bad", "2026-01-01T00:00:00Z", &["x"]);
        let all = [a.clone(), b.clone(), c.clone(), bad.clone()];
        assert!(usable(&a, &all).is_ok() && usable(&b, &all).is_ok());
        assert_eq!(
            usable(&c, &all),
            Err(Refusal::Overlapping { with: "a".into() })
        );
        assert!(matches!(usable(&bad, &all), Err(Refusal::Invalid(_))));
    }
}
