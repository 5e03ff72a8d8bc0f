//! CIDRs: the `--cluster-cidr` flag (upstream `processCIDRs` in `app/core.go`) and the address
//! arithmetic the route controller needs to decide which cloud routes it owns.
//!
//! Upstream parses the flag only when the route controller starts and exits the process on the
//! empty default, which crash-loops the pod with a terse message; here the error names the flag
//! and says what to set, so the binary can report it at validation time.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IP network in CIDR notation, normalised to its network address (as Go's `net.ParseCIDR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// Why a string is not a CIDR.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid CIDR address: {0}")]
pub struct ParseCidrError(String);

impl Cidr {
    /// The network address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether this is an IPv4 network (dual-stack needs one of each family).
    pub fn is_ipv4(&self) -> bool {
        self.network.is_ipv4()
    }

    fn bits(&self) -> u32 {
        if self.is_ipv4() { 32 } else { 128 }
    }

    fn host_mask(&self) -> u128 {
        let host_bits = self.bits() - u32::from(self.prefix);
        if host_bits == 0 {
            0
        } else {
            u128::MAX >> (128 - host_bits)
        }
    }

    /// The first address of the network.
    pub fn first(&self) -> IpAddr {
        self.network
    }

    /// The last (broadcast) address of the network.
    pub fn last(&self) -> IpAddr {
        from_u128(self.is_ipv4(), to_u128(self.network) | self.host_mask())
    }

    /// Whether `ip` lies inside this network; addresses of the other family never do.
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.is_ipv4() && to_u128(ip) & !self.host_mask() == to_u128(self.network)
    }
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_u128(v4: bool, bits: u128) -> IpAddr {
    if v4 {
        // Only the low 32 bits are ever set for an IPv4 network.
        IpAddr::V4(Ipv4Addr::from(bits as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(bits))
    }
}

impl FromStr for Cidr {
    type Err = ParseCidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseCidrError(s.to_string());
        let (addr, prefix) = s.split_once('/').ok_or_else(err)?;
        let ip: IpAddr = addr.parse().map_err(|_| err())?;
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let prefix: u8 = prefix.parse().map_err(|_| err())?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(err());
        }
        let mut cidr = Cidr {
            network: ip,
            prefix,
        };
        cidr.network = from_u128(ip.is_ipv4(), to_u128(ip) & !cidr.host_mask());
        Ok(cidr)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// Why `--cluster-cidr` cannot be used by the route controller; each message says what to set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClusterCidrError {
    /// The flag is empty (its default) while routes are to be configured.
    #[error(
        "--cluster-cidr is empty, but the route controller needs the cluster's pod network: set --cluster-cidr=<CIDR> (e.g. 10.244.0.0/16, or 10.244.0.0/16,fd00:10:244::/56 for dual-stack), or disable routes with --configure-cloud-routes=false or --controllers=*,-route"
    )]
    Empty,
    /// One entry is not a CIDR.
    #[error("--cluster-cidr entry {entry:?} is not a CIDR (expected e.g. 10.244.0.0/16): {source}")]
    Invalid {
        /// The offending entry.
        entry: String,
        /// The parse failure.
        source: ParseCidrError,
    },
    /// More than two CIDRs were given.
    #[error("--cluster-cidr has {0} CIDRs; at most two are allowed (one IPv4 and one IPv6)")]
    TooMany(usize),
    /// Two CIDRs of the same family were given.
    #[error(
        "--cluster-cidr has two CIDRs of the same IP family; dual-stack needs one IPv4 and one IPv6 CIDR"
    )]
    NotDualStack,
}

/// Parses `--cluster-cidr`: trimmed, comma-separated, one CIDR or a dual-stack pair.
pub fn parse_cluster_cidrs(flag: &str) -> Result<Vec<Cidr>, ClusterCidrError> {
    let flag = flag.trim();
    if flag.is_empty() {
        return Err(ClusterCidrError::Empty);
    }
    let cidrs = flag
        .split(',')
        .map(|entry| {
            entry
                .parse::<Cidr>()
                .map_err(|source| ClusterCidrError::Invalid {
                    entry: entry.to_string(),
                    source,
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if cidrs.len() > 2 {
        return Err(ClusterCidrError::TooMany(cidrs.len()));
    }
    if cidrs.len() == 2 && cidrs[0].is_ipv4() == cidrs[1].is_ipv4() {
        return Err(ClusterCidrError::NotDualStack);
    }
    Ok(cidrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_cidr_table() {
        let ok = [
            ("10.0.0.0/8", "10.0.0.0/8", "10.0.0.0", "10.255.255.255"),
            ("10.1.2.3/16", "10.1.0.0/16", "10.1.0.0", "10.1.255.255"),
            (
                "192.168.1.7/32",
                "192.168.1.7/32",
                "192.168.1.7",
                "192.168.1.7",
            ),
            ("0.0.0.0/0", "0.0.0.0/0", "0.0.0.0", "255.255.255.255"),
            (
                "fd00:10:244::/56",
                "fd00:10:244::/56",
                "fd00:10:244::",
                "fd00:10:244:ff:ffff:ffff:ffff:ffff",
            ),
            (
                "::/0",
                "::/0",
                "::",
                "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            ),
            ("fd00::1/128", "fd00::1/128", "fd00::1", "fd00::1"),
        ];
        for (input, display, first, last) in ok {
            let c: Cidr = input.parse().unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(c.to_string(), display, "{input}");
            assert_eq!(c.first().to_string(), first, "{input}");
            assert_eq!(c.last().to_string(), last, "{input}");
        }
        for bad in [
            "",
            "10.0.0.0",
            "10.0.0.0/",
            "10.0.0.0/33",
            "fd00::/129",
            "10.0.0.0/+8",
            "x/8",
            " 10.0.0.0/8",
            "10.0.0.0/8 ",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn contains_table() {
        let net: Cidr = "10.244.0.0/16".parse().unwrap();
        let v6: Cidr = "fd00::/64".parse().unwrap();
        let cases = [
            (net, "10.244.0.0", true),
            (net, "10.244.255.255", true),
            (net, "10.245.0.0", false),
            (net, "10.243.255.255", false),
            (net, "::ffff:10.244.0.1", false),
            (v6, "fd00::abcd", true),
            (v6, "fd00:0:0:1::", false),
            (v6, "10.244.0.1", false),
        ];
        for (cidr, ip, want) in cases {
            assert_eq!(cidr.contains(ip.parse().unwrap()), want, "{cidr} ∋ {ip}");
        }
    }

    #[test]
    fn cluster_cidr_table() {
        let cases: Vec<(&str, Result<usize, ClusterCidrError>)> = vec![
            ("10.244.0.0/16", Ok(1)),
            ("  10.244.0.0/16  ", Ok(1)),
            ("10.244.0.0/16,fd00::/56", Ok(2)),
            ("fd00::/56,10.244.0.0/16", Ok(2)),
            ("", Err(ClusterCidrError::Empty)),
            ("   ", Err(ClusterCidrError::Empty)),
            (
                "10.0.0.0/8,10.1.0.0/16",
                Err(ClusterCidrError::NotDualStack),
            ),
            (
                "10.0.0.0/8,fd00::/56,10.1.0.0/16",
                Err(ClusterCidrError::TooMany(3)),
            ),
        ];
        for (flag, want) in cases {
            assert_eq!(parse_cluster_cidrs(flag).map(|c| c.len()), want, "{flag:?}");
        }
        match parse_cluster_cidrs("10.0.0.0/8, fd00::/56") {
            Err(ClusterCidrError::Invalid { entry, .. }) => assert_eq!(entry, " fd00::/56"),
            other => panic!("unexpected {other:?}"),
        }
        let msg = ClusterCidrError::Empty.to_string();
        assert!(
            msg.contains("set --cluster-cidr=") && msg.contains("--configure-cloud-routes=false"),
            "{msg}"
        );
    }
}
