//! JSON merge patch (RFC 7386): objects merge recursively, `null` deletes, anything else replaces.

use serde_json::Value;

/// `original` with `patch` merged in.
pub fn merge_patch(original: &Value, patch: &Value) -> Value {
    match (original, patch) {
        (Value::Object(o), Value::Object(p)) => {
            let mut out = o.clone();
            for (k, pv) in p {
                if pv.is_null() {
                    out.remove(k);
                } else {
                    let merged = merge_patch(o.get(k).unwrap_or(&Value::Null), pv);
                    out.insert(k.clone(), merged);
                }
            }
            Value::Object(out)
        }
        (_, Value::Object(p)) => merge_patch(
            &Value::Object(Default::default()),
            &Value::Object(p.clone()),
        ),
        (_, p) => p.clone(),
    }
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
