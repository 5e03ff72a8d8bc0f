//! JSON merge patch (RFC 7386): objects merge recursively, `null` deletes, anything else replaces;
//! the `json-patch` crate's `merge`, which kube itself uses.

use serde_json::Value;

/// `original` with `patch` merged in.
pub fn merge_patch(original: &Value, patch: &Value) -> Value {
    let mut out = original.clone();
    json_patch::merge(&mut out, patch);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc7386_examples() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (o, p, want) in cases {
            assert_eq!(merge_patch(&o, &p), want, "{o} + {p}");
        }
    }
}
