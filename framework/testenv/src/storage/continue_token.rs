//! `continue` tokens for paginated lists, in upstream's format: unpadded URL-safe base64
//! (`base64.RawURLEncoding`, k8s.io/apiserver `storage.EncodeContinue`) of
//! `{"v":"meta.k8s.io/v1","rv":N,"start":"KEY\u0000"}`, so a token names both the list's
//! resourceVersion (pages come from that snapshot) and the key to resume after.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use crate::api::status::ApiError;
use crate::storage::store::ObjKey;

/// Lenient on purpose, as tokens come from clients: either alphabet, padding optional. The
/// error is Go's for the first byte outside both alphabets.
fn b64_decode(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let mut buf = 0u32;
    let mut bits = 0;
    for (i, c) in s.bytes().enumerate().filter(|(_, c)| *c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return Err(format!("illegal base64 data at input byte {i}")),
        };
        buf = (buf << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
        }
    }
    Ok(out)
}

/// Which objects a list ranges over, so which key prefix its tokens' start keys are relative to
/// (upstream's `keyPrefix`: `/registry/<resource>/` or `/registry/<resource>/<namespace>/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// A cluster-scoped type: the start key is a name.
    Cluster,
    /// A namespaced type across namespaces: `<namespace>/<name>`.
    AllNamespaces,
    /// A namespaced type in one namespace: a name.
    Namespace(&'a str),
}

/// Token for a page that ended at `last`.
pub fn encode(rv: u64, last: &ObjKey, scope: Scope<'_>) -> String {
    let start = match scope {
        Scope::AllNamespaces => format!("{}/{}\u{0}", last.0, last.1),
        Scope::Cluster | Scope::Namespace(_) => format!("{}\u{0}", last.1),
    };
    let start = serde_json::to_string(&start).unwrap_or_default();
    URL_SAFE_NO_PAD
        .encode(format!("{{\"v\":\"meta.k8s.io/v1\",\"rv\":{rv},\"start\":{start}}}").as_bytes())
}

/// (resourceVersion, key to resume after) from a token, refused as upstream's storage
/// (`DecodeContinue`) refuses it: 400 `invalid continue token: continue key is not valid: ...`,
/// also for a start key that is no clean path below the list's prefix (`../../kube-system/`).
pub fn decode(token: &str, scope: Scope<'_>) -> Result<(u64, ObjKey), ApiError> {
    let bad = |why: &dyn std::fmt::Display| {
        ApiError::bad_request(format!(
            "invalid continue token: continue key is not valid: {why}"
        ))
    };
    let bytes = b64_decode(token).map_err(|e| bad(&e))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(&e))?;
    let version = v["v"].as_str().unwrap_or("");
    if version != "meta.k8s.io/v1" {
        let quoted = serde_json::to_string(version).unwrap_or_default();
        return Err(bad(&format!(
            "server does not recognize this encoded version {quoted}"
        )));
    }
    let rv = match &v["rv"] {
        Value::Null => 0,
        n => n.as_u64().ok_or_else(|| bad(&format!("rv: {n}")))?,
    };
    if rv == 0 {
        return Err(bad(
            &"incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let start = v["start"].as_str().unwrap_or("");
    if start.is_empty() {
        return Err(bad(&"encoded start key empty (version meta.k8s.io/v1)"));
    }
    let rooted = match start.starts_with('/') {
        true => start.to_string(),
        false => format!("/{start}"),
    };
    if clean(&rooted) != rooted {
        return Err(bad(&start));
    }
    let rel = rooted[1..].trim_end_matches('\u{0}');
    let key = match scope {
        Scope::Cluster => (String::new(), rel.to_string()),
        Scope::Namespace(ns) => (ns.to_string(), rel.to_string()),
        Scope::AllNamespaces => match rel.split_once('/') {
            Some((ns, name)) => (ns.to_string(), name.to_string()),
            None => (rel.to_string(), String::new()),
        },
    };
    Ok((rv, key))
}

/// Go's `path.Clean` of a rooted path: no empty, `.` or `..` elements, no trailing slash.
fn clean(rooted: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in rooted.split('/') {
        match part {
            "" | "." => {}
            ".." => drop(parts.pop()),
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_unpadded_url_safe_base64_and_round_trip() {
        // 1 to 3 extra bytes of name move the JSON's length through every residue mod 3.
        for name in ["n", "n1", "n12", "node-?>~"] {
            let token = encode(5, &(String::new(), name.into()), Scope::Cluster);
            assert!(
                !token.contains(['=', '+', '/']),
                "{name}: {token} is not RawURLEncoding"
            );
            assert_eq!(
                decode(&token, Scope::Cluster).unwrap(),
                (5, (String::new(), name.into()))
            );
        }
    }

    #[test]
    fn matches_the_captured_upstream_token() {
        let token = encode(387, &(String::new(), "golden-n1".into()), Scope::Cluster);
        assert_eq!(
            token,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Mzg3LCJzdGFydCI6ImdvbGRlbi1uMVx1MDAwMCJ9"
        );
        assert_eq!(
            decode(&token, Scope::Cluster).unwrap(),
            (387, (String::new(), "golden-n1".into()))
        );
        let all = encode(5, &("default".into(), "a".into()), Scope::AllNamespaces);
        assert_eq!(
            decode(&all, Scope::AllNamespaces).unwrap(),
            (5, ("default".into(), "a".into()))
        );
        // Within one namespace the start key is the name alone, as upstream's.
        let one = encode(
            5,
            &("default".into(), "a".into()),
            Scope::Namespace("default"),
        );
        let start = URL_SAFE_NO_PAD.decode(&one).unwrap();
        assert!(
            String::from_utf8(start)
                .unwrap()
                .ends_with(r#""start":"a\u0000"}"#)
        );
        assert_eq!(
            decode(&one, Scope::Namespace("default")).unwrap(),
            (5, ("default".into(), "a".into()))
        );
        let refused = decode("!!", Scope::Cluster).unwrap_err();
        assert_eq!(
            (refused.code, refused.message.as_str()),
            (
                400,
                "invalid continue token: continue key is not valid: illegal base64 data at input byte 0"
            )
        );
    }

    #[test]
    fn forged_tokens_are_refused_with_upstreams_words() {
        let forge = |json: &str| URL_SAFE_NO_PAD.encode(json);
        let cases = [
            (
                r#"{"v":"meta.k8s.io/v1","rv":5,"start":"../../kube-system/"}"#,
                "../../kube-system/",
            ),
            (
                r#"{"v":"meta.k8s.io/v1","rv":5,"start":"a/../../b"}"#,
                "a/../../b",
            ),
            (r#"{"v":"meta.k8s.io/v1","rv":5,"start":"a//b"}"#, "a//b"),
            (r#"{"v":"meta.k8s.io/v1","rv":5,"start":"a/"}"#, "a/"),
            (
                r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#,
                "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ),
            (
                r#"{"v":"meta.k8s.io/v1","rv":5}"#,
                "encoded start key empty (version meta.k8s.io/v1)",
            ),
            (
                r#"{"v":"v0","rv":5,"start":"a"}"#,
                r#"server does not recognize this encoded version "v0""#,
            ),
        ];
        for (json, why) in cases {
            let err = decode(&forge(json), Scope::Namespace("default")).unwrap_err();
            assert_eq!(
                (err.code, err.message),
                (
                    400,
                    format!("invalid continue token: continue key is not valid: {why}")
                ),
                "{json}"
            );
        }
        let inside = forge(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"/kube-system/x\u0000"}"#);
        assert_eq!(
            decode(&inside, Scope::Namespace("default")).unwrap(),
            (5, ("default".into(), "kube-system/x".into()))
        );
    }
}
