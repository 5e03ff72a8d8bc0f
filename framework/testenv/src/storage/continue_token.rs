//! `continue` tokens for paginated lists, in upstream's format: unpadded URL-safe base64
//! (`base64.RawURLEncoding`, k8s.io/apiserver `storage.EncodeContinue`) of
//! `{"v":"meta.k8s.io/v1","rv":N,"start":"KEY\u0000"}`, so a token names both the list's
//! resourceVersion (pages come from that snapshot) and the key to resume after.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use crate::api::status::ApiError;
use crate::storage::store::ObjKey;

/// Lenient on purpose, as tokens come from clients: either alphabet, padding optional.
fn b64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let mut buf = 0u32;
    let mut bits = 0;
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        buf = (buf << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
        }
    }
    Some(out)
}

/// Token for a page that ended at `last`.
pub fn encode(rv: u64, last: &ObjKey, namespaced: bool) -> String {
    let start = if namespaced {
        format!("{}/{}\u{0}", last.0, last.1)
    } else {
        format!("{}\u{0}", last.1)
    };
    let start = serde_json::to_string(&start).unwrap_or_default();
    URL_SAFE_NO_PAD
        .encode(format!("{{\"v\":\"meta.k8s.io/v1\",\"rv\":{rv},\"start\":{start}}}").as_bytes())
}

/// (resourceVersion, key to resume after) from a token.
pub fn decode(token: &str, namespaced: bool) -> Result<(u64, ObjKey), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let bytes = b64_decode(token).ok_or_else(bad)?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    if v["v"] != "meta.k8s.io/v1" {
        return Err(bad());
    }
    let rv = v["rv"].as_u64().ok_or_else(bad)?;
    let start = v["start"]
        .as_str()
        .ok_or_else(bad)?
        .trim_end_matches('\u{0}');
    let key = if namespaced {
        let (ns, name) = start.split_once('/').ok_or_else(bad)?;
        (ns.to_string(), name.to_string())
    } else {
        (String::new(), start.to_string())
    };
    Ok((rv, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_unpadded_url_safe_base64_and_round_trip() {
        // 1 to 3 extra bytes of name move the JSON's length through every residue mod 3.
        for name in ["n", "n1", "n12", "node-?>~"] {
            let token = encode(5, &(String::new(), name.into()), false);
            assert!(
                !token.contains(['=', '+', '/']),
                "{name}: {token} is not RawURLEncoding"
            );
            assert_eq!(
                decode(&token, false).unwrap(),
                (5, (String::new(), name.into()))
            );
        }
    }

    #[test]
    fn matches_the_captured_upstream_token() {
        let token = encode(387, &(String::new(), "golden-n1".into()), false);
        assert_eq!(
            token,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Mzg3LCJzdGFydCI6ImdvbGRlbi1uMVx1MDAwMCJ9"
        );
        assert_eq!(
            decode(&token, false).unwrap(),
            (387, (String::new(), "golden-n1".into()))
        );
        let ns = encode(5, &("default".into(), "a".into()), true);
        assert_eq!(
            decode(&ns, true).unwrap(),
            (5, ("default".into(), "a".into()))
        );
        assert_eq!(decode("!!", false).unwrap_err().code, 400);
    }
}
