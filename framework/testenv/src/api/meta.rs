//! Object metadata: the values the server makes up (the random suffixes upstream appends to
//! generated names, `metadata.generateName` and the `kube-api-access-` volume of a Pod, five
//! characters from an alphabet without vowels; timestamps as `metav1.Time` writes them), and
//! the `metadata` object of a body.

use rand::Rng;
use serde_json::{Map, Value, json};

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

/// The `metadata` object of `obj`, made an object if it is not one.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}
