//! Object-meta values the server makes up: the random suffixes upstream appends to generated
//! names (`metadata.generateName`, the `kube-api-access-` volume of a Pod; five characters from
//! an alphabet without vowels) and timestamps as `metav1.Time` writes them.

use rand::Rng;

const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Five random characters, as `utilrand.String(5)`.
pub fn random_suffix() -> String {
    let mut rng = rand::rng();
    (0..5)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

/// RFC 3339 in whole seconds, as upstream serializes `metav1.Time`.
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
