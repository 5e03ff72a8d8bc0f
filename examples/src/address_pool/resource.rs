//! The `AddressPool` custom resource (`addresspools.metal.example.com`, cluster-scoped, version
//! `v1`: the storage version and the conversion hub), modelled on MetalLB's `IPAddressPool`:
//! ranges a LoadBalancer Service may get its ingress IP from, and whether Services get one
//! without asking for the pool by name. The older `v1alpha1` shape is [`super::v1alpha1`].
//!
//! Also owns reading the addresses ([`AddressRange`]) and deciding which pools may hand them out
//! ([`usable`]): the allocator, the status controller and the overlap webhook ask the same
//! functions, so a pool the status calls Overlapping is never allocated from, whatever the status
//! write's latency.

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
    version = "v1",
    kind = "AddressPool",
    plural = "addresspools",
    shortname = "apool",
    status = "AddressPoolStatus",
    doc = "A pool of addresses for LoadBalancer Services, handed out by metal-ccm's address-pool controller.",
    printcolumn(name = "Assignment", type_ = "string", json_path = ".spec.assignment"),
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
    /// Inclusive address ranges (`{start: 192.0.2.0, end: 192.0.2.15}`), IPv4 or IPv6.
    pub ranges: Vec<IpRange>,
    /// `Automatic`: Services without the `metal.example.com/address-pool` annotation may get an
    /// address from this pool (pools are tried in name order); `Manual`: only Services naming
    /// it. Left out, the defaulting webhook writes `Automatic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignment: Option<Assignment>,
}

/// One inclusive range of addresses of one family.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct IpRange {
    /// The first address.
    pub start: String,
    /// The last address (the same as `start` for a single address).
    pub end: String,
}

/// Which Services a pool hands addresses to.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Assignment {
    /// Any LoadBalancer Service, unless it names another pool.
    Automatic,
    /// Only Services whose `metal.example.com/address-pool` annotation names the pool.
    Manual,
}

impl AddressPool {
    /// Whether Services that name no pool may get an address from this one (unset counts as
    /// `Automatic`, for pools written while the defaulting webhook was not running).
    pub fn is_automatic(&self) -> bool {
        self.spec.assignment != Some(Assignment::Manual)
    }
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
        Self::between(first, last).map_err(|why| format!("{text:?} {why}"))
    }

    /// The range from `first` to `last`, both included; the error says what is wrong.
    pub fn between(first: IpAddr, last: IpAddr) -> Result<Self, String> {
        if first.is_ipv6() != last.is_ipv6() {
            return Err("mixes IPv4 and IPv6".to_string());
        }
        let (a, b) = (to_int(first), to_int(last));
        if a > b {
            return Err("ends before it starts".to_string());
        }
        Ok(Self {
            v6: first.is_ipv6(),
            first: a,
            last: b,
        })
    }

    /// Reads a `v1` range: `start` and `end` addresses of one family, in order.
    pub fn of(range: &IpRange) -> Result<Self, String> {
        let ip = |field: &str, s: &str| {
            s.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("{field} {s:?} is not an IP address"))
        };
        let (start, end) = (ip("start", &range.start)?, ip("end", &range.end)?);
        Self::between(start, end).map_err(|why| format!("{start}-{end} {why}"))
    }

    /// The first address.
    pub fn first(&self) -> IpAddr {
        from_int(self.v6, self.first)
    }

    /// The last address.
    pub fn last(&self) -> IpAddr {
        from_int(self.v6, self.last)
    }

    /// As `v1` writes it.
    pub fn to_spec(&self) -> IpRange {
        IpRange {
            start: self.first().to_string(),
            end: self.last().to_string(),
        }
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

/// The shortest `v1alpha1` text: one address, a CIDR when the range is one aligned block, else
/// `first-last`. [`AddressRange::parse`] reads it back to the same range.
impl std::fmt::Display for AddressRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (first, last) = (self.first(), self.last());
        if self.first == self.last {
            return write!(f, "{first}");
        }
        let bits = if self.v6 { 128 } else { 32 };
        let size = self.last - self.first;
        // A block: its size is 2^n - 1 apart and its start is aligned to it.
        let block = size.checked_add(1).is_none_or(u128::is_power_of_two);
        if block && self.first & size == 0 {
            let host_bits = 128 - size.leading_zeros();
            return write!(f, "{first}/{}", bits - host_bits);
        }
        write!(f, "{first}-{last}")
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
    /// An entry of `spec.ranges` cannot be read.
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
        .filter(|other| seniority(other) < seniority(pool));
    match first_overlap(&ranges, older) {
        Some(overlap) => Err(Refusal::Overlapping { with: overlap.pool }),
        None => Ok(ranges),
    }
}

/// Where a pool's ranges meet another pool's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// The index in `spec.ranges` of the range that overlaps.
    pub index: usize,
    /// That range.
    pub range: AddressRange,
    /// The other pool.
    pub pool: String,
    /// The other pool's range it meets.
    pub theirs: AddressRange,
}

/// The first range of `ranges` that meets a range of one of `others` (whose invalid ranges do
/// not count).
pub fn first_overlap<'a>(
    ranges: &[AddressRange],
    others: impl IntoIterator<Item = &'a Arc<AddressPool>>,
) -> Option<Overlap> {
    for other in others {
        let Ok(theirs) = self::ranges(other) else {
            continue;
        };
        for (index, range) in ranges.iter().enumerate() {
            if let Some(t) = theirs.iter().find(|t| range.overlaps(t)) {
                return Some(Overlap {
                    index,
                    range: *range,
                    pool: other.name_any(),
                    theirs: *t,
                });
            }
        }
    }
    None
}

/// Every entry of `spec.ranges`, read; the error names the entry.
pub fn ranges(pool: &AddressPool) -> Result<Vec<AddressRange>, String> {
    if pool.spec.ranges.is_empty() {
        return Err("spec.ranges is empty: list at least one range".into());
    }
    pool.spec
        .ranges
        .iter()
        .enumerate()
        .map(|(i, r)| AddressRange::of(r).map_err(|why| format!("spec.ranges[{i}]: {why}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pool(name: &str, created: &str, ranges: &[(&str, &str)]) -> Arc<AddressPool> {
        let ranges: Vec<_> = ranges
            .iter()
            .map(|(start, end)| json!({"start": start, "end": end}))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "metal.example.com/v1", "kind": "AddressPool",
                "metadata": {"name": name, "creationTimestamp": created},
                "spec": {"ranges": ranges},
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
        let a = pool("a", "2026-01-01T00:00:00Z", &[("192.0.2.0", "192.0.2.7")]);
        let b = pool(
            "b",
            "2026-01-02T00:00:00Z",
            &[("198.51.100.0", "198.51.100.7")],
        );
        let c = pool("c", "2026-01-03T00:00:00Z", &[("192.0.2.4", "192.0.2.20")]);
        let bad = pool("bad", "2026-01-01T00:00:00Z", &[("x", "192.0.2.1")]);
        let all = [a.clone(), b.clone(), c.clone(), bad.clone()];
        assert!(usable(&a, &all).is_ok() && usable(&b, &all).is_ok());
        assert_eq!(
            usable(&c, &all),
            Err(Refusal::Overlapping { with: "a".into() })
        );
        assert_eq!(
            usable(&bad, &all),
            Err(Refusal::Invalid(
                "spec.ranges[0]: start \"x\" is not an IP address".into()
            ))
        );
    }

    #[test]
    fn v1alpha1_text_is_the_shortest_that_reads_back() {
        for (text, shown) in [
            ("192.0.2.0/28", "192.0.2.0/28"),
            ("192.0.2.0-192.0.2.15", "192.0.2.0/28"),
            ("192.0.2.1-192.0.2.16", "192.0.2.1-192.0.2.16"),
            ("192.0.2.8-192.0.2.15", "192.0.2.8/29"),
            ("198.51.100.7", "198.51.100.7"),
            ("0.0.0.0/0", "0.0.0.0/0"),
            ("::/0", "::/0"),
            ("2001:db8::/120", "2001:db8::/120"),
        ] {
            let range = AddressRange::parse(text).unwrap();
            assert_eq!(range.to_string(), shown, "{text}");
            assert_eq!(AddressRange::parse(shown).unwrap(), range, "{text}");
        }
    }
}
