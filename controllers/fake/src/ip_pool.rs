//! The IP pool load balancers get their ingress address from: CIDRs (their host addresses) and
//! single addresses, handed out lowest-first so tests can predict them.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::config_error::{ConfigError, SourceLine};

/// A contiguous run of pool addresses.
#[derive(Clone, Debug)]
struct IpRange {
    first: IpAddr,
    count: u128,
}

impl IpRange {
    fn contains(&self, ip: IpAddr) -> bool {
        let offset = match (self.first, ip) {
            (IpAddr::V4(first), IpAddr::V4(ip)) => {
                u128::from(u32::from(ip)).checked_sub(u128::from(u32::from(first)))
            }
            (IpAddr::V6(first), IpAddr::V6(ip)) => u128::from(ip).checked_sub(u128::from(first)),
            _ => None,
        };
        offset.is_some_and(|o| o < self.count)
    }

    fn nth(&self, n: u128) -> Option<IpAddr> {
        if n >= self.count {
            return None;
        }
        match self.first {
            IpAddr::V4(a) => u32::try_from(u128::from(u32::from(a)) + n)
                .ok()
                .map(|v| IpAddr::V4(Ipv4Addr::from(v))),
            IpAddr::V6(a) => u128::from(a)
                .checked_add(n)
                .map(|v| IpAddr::V6(Ipv6Addr::from(v))),
        }
    }
}

/// Why a requested address could not be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ClaimError {
    /// The address is outside every pool range.
    NotInPool,
    /// Another load balancer has it.
    InUse,
}

/// Addresses load balancers get their ingress IP from; the lowest free one is handed out first.
#[derive(Clone, Debug)]
pub(super) struct IpPool {
    ranges: Vec<IpRange>,
    allocated: BTreeSet<IpAddr>,
}

impl IpPool {
    /// `192.0.2.0/24` (TEST-NET-1, reserved for documentation): never a real address.
    pub(super) fn default_pool() -> Self {
        Self {
            ranges: vec![cidr_hosts(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 0)), 24)],
            allocated: BTreeSet::new(),
        }
    }

    /// A pool from CIDRs (their host addresses) and single addresses.
    pub(super) fn parse(cidrs: &[String], addresses: &[String]) -> Result<Self, ConfigError> {
        Self::parse_at(
            cidrs.iter().map(|c| (c.as_str(), SourceLine::default())),
            addresses
                .iter()
                .map(|a| (a.as_str(), SourceLine::default())),
        )
    }

    /// As [`Self::parse`], with the config-file location of each entry for error messages.
    pub(super) fn parse_at<'a>(
        cidrs: impl IntoIterator<Item = (&'a str, SourceLine)>,
        addresses: impl IntoIterator<Item = (&'a str, SourceLine)>,
    ) -> Result<Self, ConfigError> {
        let mut ranges = Vec::new();
        for (cidr, at) in cidrs {
            let (network, prefix) =
                parse_cidr(cidr).map_err(|reason| ConfigError::InvalidCidr {
                    cidr: cidr.to_owned(),
                    reason,
                    at,
                })?;
            ranges.push(cidr_hosts(network, prefix));
        }
        for (address, at) in addresses {
            let ip = address
                .parse::<IpAddr>()
                .map_err(|_| ConfigError::InvalidPoolAddress {
                    address: address.to_owned(),
                    at,
                })?;
            ranges.push(IpRange {
                first: ip,
                count: 1,
            });
        }
        if ranges.is_empty() {
            return Err(ConfigError::EmptyPool);
        }
        Ok(Self {
            ranges,
            allocated: BTreeSet::new(),
        })
    }

    /// Takes the lowest free address, of the IPv6 family when `ipv6` is `Some(true)`, of IPv4
    /// when `Some(false)`, of either when `None`.
    pub(super) fn allocate(&mut self, ipv6: Option<bool>) -> Option<IpAddr> {
        for range in &self.ranges {
            if ipv6.is_some_and(|v6| v6 != range.first.is_ipv6()) {
                continue;
            }
            let mut n = 0;
            while let Some(ip) = range.nth(n) {
                if self.allocated.insert(ip) {
                    return Some(ip);
                }
                n += 1;
            }
        }
        None
    }

    /// Takes exactly `ip` (a Service's requested `loadBalancerIP`).
    pub(super) fn claim(&mut self, ip: IpAddr) -> Result<(), ClaimError> {
        if !self.ranges.iter().any(|r| r.contains(ip)) {
            return Err(ClaimError::NotInPool);
        }
        if !self.allocated.insert(ip) {
            return Err(ClaimError::InUse);
        }
        Ok(())
    }

    pub(super) fn release(&mut self, ip: IpAddr) {
        self.allocated.remove(&ip);
    }

    pub(super) fn in_use(&self) -> usize {
        self.allocated.len()
    }
}

/// Parses `a.b.c.d/n` or `x::/n`; host bits may be set (as Go's `net.ParseCIDR` allows) and
/// are masked off.
fn parse_cidr(cidr: &str) -> Result<(IpAddr, u8), String> {
    let (addr, prefix) = cidr
        .split_once('/')
        .ok_or_else(|| "expected ADDRESS/PREFIX, e.g. 192.0.2.0/24".to_owned())?;
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| format!("{addr:?} is not an IP address"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= max)
        .ok_or_else(|| format!("prefix length {prefix:?} is not a number from 0 to {max}"))?;
    let network = match addr {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
        }
    };
    Ok((network, prefix))
}

/// Usable host addresses of a network: IPv4 skips network and broadcast addresses (except /31
/// and /32), IPv6 skips the subnet-router anycast address (except /127 and /128).
fn cidr_hosts(network: IpAddr, prefix: u8) -> IpRange {
    let bits = if network.is_ipv4() { 32 } else { 128 };
    let host_bits = u32::from(bits - prefix);
    let size = 1u128.checked_shl(host_bits).unwrap_or(u128::MAX);
    let (skip_first, skip_last) = match (network, host_bits) {
        (_, 0 | 1) => (0, 0),
        (IpAddr::V4(_), _) => (1, 1),
        (IpAddr::V6(_), _) => (1, 0),
    };
    IpRange {
        first: IpRange {
            first: network,
            count: size,
        }
        .nth(skip_first)
        .unwrap_or(network),
        count: size - skip_first - skip_last,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_hosts_skip_network_and_broadcast() {
        let mut pool = IpPool::parse(&["10.0.0.5/30".into()], &[]).unwrap();
        let got: Vec<_> = std::iter::from_fn(|| pool.allocate(None)).collect();
        // Host bits are masked: 10.0.0.5/30 is 10.0.0.4/30, hosts .5 and .6.
        assert_eq!(
            got,
            vec![
                "10.0.0.5".parse::<IpAddr>().unwrap(),
                "10.0.0.6".parse().unwrap()
            ]
        );
        let mut pool = IpPool::parse(&["10.0.0.7/32".into()], &[]).unwrap();
        assert_eq!(pool.allocate(None), Some("10.0.0.7".parse().unwrap()));
        assert_eq!(pool.allocate(None), None);
        let mut pool = IpPool::parse(&["2001:db8::/126".into()], &[]).unwrap();
        let got: Vec<_> = std::iter::from_fn(|| pool.allocate(None)).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], "2001:db8::1".parse::<IpAddr>().unwrap());
        let mut pool = IpPool::parse(&["::/0".into()], &[]).unwrap();
        assert_eq!(pool.allocate(None), Some("::1".parse().unwrap()));
    }

    #[test]
    fn bad_cidrs_and_addresses_are_rejected_with_a_reason() {
        for bad in ["10.0.0.0", "10.0.0.0/33", "x/24", "10.0.0.0/abc", "::/129"] {
            let err = IpPool::parse(&[bad.into()], &[]).unwrap_err();
            assert!(
                matches!(err, ConfigError::InvalidCidr { .. }),
                "{bad}: {err}"
            );
        }
        let err = IpPool::parse(&[], &["10.0.0.300".into()]).unwrap_err();
        assert!(
            matches!(err, ConfigError::InvalidPoolAddress { .. }),
            "{err}"
        );
        assert!(matches!(
            IpPool::parse(&[], &[]),
            Err(ConfigError::EmptyPool)
        ));
    }

    #[test]
    fn allocation_honours_the_family_and_exact_claims() {
        let mut pool =
            IpPool::parse(&["10.0.0.0/30".into(), "2001:db8::/126".into()], &[]).unwrap();
        assert_eq!(
            pool.allocate(Some(true)),
            Some("2001:db8::1".parse().unwrap())
        );
        assert_eq!(
            pool.allocate(Some(false)),
            Some("10.0.0.1".parse().unwrap())
        );
        assert_eq!(pool.claim("10.0.0.2".parse().unwrap()), Ok(()));
        assert_eq!(
            pool.claim("10.0.0.2".parse().unwrap()),
            Err(ClaimError::InUse)
        );
        // Network and broadcast addresses are not in the pool.
        assert_eq!(
            pool.claim("10.0.0.3".parse().unwrap()),
            Err(ClaimError::NotInPool)
        );
        assert_eq!(
            pool.claim("10.0.0.0".parse().unwrap()),
            Err(ClaimError::NotInPool)
        );
        assert_eq!(
            pool.claim("::ffff:10.0.0.1".parse().unwrap()),
            Err(ClaimError::NotInPool)
        );
        assert_eq!(pool.allocate(Some(false)), None);
        assert_eq!(pool.allocate(None), Some("2001:db8::2".parse().unwrap()));
        pool.release("10.0.0.2".parse().unwrap());
        assert_eq!(
            pool.allocate(Some(false)),
            Some("10.0.0.2".parse().unwrap())
        );
        assert_eq!(pool.in_use(), 4);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Allocate,
        Release(usize),
        Claim(u8),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            Just(Op::Allocate),
            any::<usize>().prop_map(Op::Release),
            any::<u8>().prop_map(Op::Claim),
        ]
    }

    proptest::proptest! {
        /// Against a naive model (every host of 10.0.0.0/28 plus 10.0.1.1, lowest free first):
        /// no address is handed out twice, every address is a pool host, and released addresses
        /// come back.
        #[test]
        fn pool_matches_a_naive_model(ops in proptest::collection::vec(op(), 0..80)) {
            let mut pool = IpPool::parse(&["10.0.0.0/28".into()], &["10.0.1.1".into()]).unwrap();
            let hosts: Vec<IpAddr> = (1..15)
                .map(|h| IpAddr::V4(Ipv4Addr::new(10, 0, 0, h)))
                .chain([IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1))])
                .collect();
            let mut taken: BTreeSet<IpAddr> = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Allocate => {
                        let want = hosts.iter().copied().find(|h| !taken.contains(h));
                        proptest::prop_assert_eq!(pool.allocate(None), want);
                        taken.extend(want);
                    }
                    Op::Release(i) => {
                        if let Some(ip) = taken.iter().nth(i % taken.len().max(1)).copied() {
                            pool.release(ip);
                            taken.remove(&ip);
                        }
                    }
                    Op::Claim(last) => {
                        let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, last));
                        let want = if !hosts.contains(&ip) {
                            Err(ClaimError::NotInPool)
                        } else if taken.contains(&ip) {
                            Err(ClaimError::InUse)
                        } else {
                            Ok(())
                        };
                        proptest::prop_assert_eq!(pool.claim(ip), want);
                        if want.is_ok() {
                            taken.insert(ip);
                        }
                    }
                }
                proptest::prop_assert_eq!(pool.in_use(), taken.len());
            }
        }
    }
}
