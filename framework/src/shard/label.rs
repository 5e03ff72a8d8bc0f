//! Label-mode assignment, the pure part: how a ring is chosen to record its assignment on the
//! objects ([`ShardAssignment`]), the label key of a ring and value of a member, and the label
//! selectors of a member's informer and of its watch of the unassigned objects.

use std::fmt;
use std::str::FromStr;

use super::ring::stable_hash;

/// Prefix of every ring's assignment label key.
pub const LABEL_PREFIX: &str = "shard.controller-manager.io";

/// How a sharded controller's keys reach the replica that owns them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ShardAssignment {
    /// Every replica caches every object; the ring gate filters by hash (the default).
    #[default]
    Hash,
    /// The owner is recorded on each object of the primary kind as a label, and each replica's
    /// informer for that kind watches only its own label: each caches about `1/N` of them.
    Label,
}

impl ShardAssignment {
    /// The flag spelling: `hash` or `label`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hash => "hash",
            Self::Label => "label",
        }
    }
}

impl fmt::Display for ShardAssignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ShardAssignment {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "hash" => Ok(Self::Hash),
            "label" => Ok(Self::Label),
            other => Err(format!("{other:?} is not one of \"hash\", \"label\"")),
        }
    }
}

/// The label value naming `identity`: the 16 hex digits of its stable hash (the suffix of its
/// Lease name), a valid label value whatever the identity contains.
pub fn member_value(identity: &str) -> String {
    format!("{:016x}", stable_hash(identity.as_bytes()))
}

/// The name part of a label key may have at most this many characters.
const MAX_NAME_PART: usize = 63;

/// Whether `s` is a valid label-key name part: 1–63 alphanumerics, `-`, `_`, `.`, starting and
/// ending alphanumeric (apimachinery's `IsQualifiedName`).
fn valid_name_part(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    !s.is_empty()
        && s.len() <= MAX_NAME_PART
        && edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The label key recording `ring`'s assignment: `shard.controller-manager.io/<ring>`, or, when
/// the ring name is no valid name part, its first valid characters and the 16 hex of its hash.
pub fn label_key(ring: &str) -> String {
    if valid_name_part(ring) {
        return format!("{LABEL_PREFIX}/{ring}");
    }
    let kept: String = ring
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(MAX_NAME_PART - 17)
        .collect();
    let kept = kept.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let hash = format!("{:016x}", stable_hash(ring.as_bytes()));
    if kept.is_empty() {
        format!("{LABEL_PREFIX}/{hash}")
    } else {
        format!("{LABEL_PREFIX}/{kept}-{hash}")
    }
}

/// One member's label in one ring: the key and its own value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardLabel {
    /// The ring's label key ([`label_key`]).
    pub key: String,
    /// This member's value ([`member_value`]).
    pub value: String,
}

impl ShardLabel {
    /// The label of `identity` in `ring`.
    pub fn new(ring: &str, identity: &str) -> Self {
        Self {
            key: label_key(ring),
            value: member_value(identity),
        }
    }

    /// Selects the objects assigned to this member: `<key>=<value>`.
    pub fn own_selector(&self) -> String {
        format!("{}={}", self.key, self.value)
    }

    /// Selects the objects assigned to no member of `live` (label values): unlabelled ones, and
    /// those whose label names anything else (a member that left, a typo, another cluster's
    /// member), to be claimed. `notin` matches an object without the key, as upstream.
    pub fn unassigned_selector<'a>(&self, live: impl IntoIterator<Item = &'a str>) -> String {
        let mut values: Vec<&str> = live.into_iter().collect();
        values.sort_unstable();
        values.dedup();
        format!("{} notin ({})", self.key, values.join(","))
    }

    /// `selector` (possibly empty) narrowed by the requirement `also`.
    pub fn narrow(selector: Option<&str>, also: &str) -> String {
        match selector.filter(|s| !s.is_empty()) {
            Some(s) => format!("{s},{also}"),
            None => also.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_spellings_round_trip_and_others_are_refused() {
        for a in [ShardAssignment::Hash, ShardAssignment::Label] {
            assert_eq!(a.as_str().parse::<ShardAssignment>(), Ok(a));
        }
        assert_eq!(ShardAssignment::default(), ShardAssignment::Hash);
        let err = "Label".parse::<ShardAssignment>().unwrap_err();
        assert_eq!(err, r#""Label" is not one of "hash", "label""#);
    }

    #[test]
    fn keys_are_valid_label_keys_for_any_ring_name() {
        assert_eq!(
            label_key("ccm-service"),
            "shard.controller-manager.io/ccm-service"
        );
        let long = "m".repeat(70);
        for ring in [long.as_str(), "-weird/ring name-", "///"] {
            let key = label_key(ring);
            let name = key.strip_prefix("shard.controller-manager.io/").unwrap();
            assert!(valid_name_part(name), "{ring:?} gave {key:?}");
        }
        // Distinct long names stay distinct.
        assert_ne!(label_key(&"a".repeat(64)), label_key(&"a".repeat(65)));
    }

    #[test]
    fn values_are_sixteen_hex_digits_as_in_lease_names() {
        let v = member_value("host-1_2f0c3a9e-7a1c-4b8e");
        assert_eq!(v.len(), 16);
        assert!(v.chars().all(|c| c.is_ascii_hexdigit()));
        assert!(super::super::lease_name("r", "host-1_2f0c3a9e-7a1c-4b8e").ends_with(&v));
    }

    #[test]
    fn selectors_say_what_each_informer_and_list_wants() {
        let l = ShardLabel::new("m-mirror", "a");
        let (k, a) = (&l.key, &l.value);
        assert_eq!(l.own_selector(), format!("{k}={a}"));
        assert_eq!(
            l.unassigned_selector(["b", "a", "b"]),
            format!("{k} notin (a,b)")
        );
        let own = l.own_selector();
        assert_eq!(ShardLabel::narrow(None, &own), own);
        assert_eq!(ShardLabel::narrow(Some(""), &own), own);
        assert_eq!(
            ShardLabel::narrow(Some("app=x"), &own),
            format!("app=x,{k}={a}")
        );
    }
}
