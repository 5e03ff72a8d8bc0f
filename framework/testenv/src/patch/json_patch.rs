//! JSON patch (RFC 6902): add, remove, replace, move, copy and test over JSON pointers, applied
//! atomically; failures are 422 as kube-apiserver reports them.

use serde_json::Value;

use crate::status::ApiError;

fn unescape(seg: &str) -> String {
    seg.replace("~1", "/").replace("~0", "~")
}

fn split(path: &str) -> Result<Vec<String>, ApiError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| unprocessable(format!("invalid JSON pointer: {path}")))?;
    Ok(rest.split('/').map(unescape).collect())
}

fn unprocessable(message: String) -> ApiError {
    ApiError {
        code: 422,
        reason: "Invalid",
        message,
        details: Some(serde_json::json!({})),
        retry_after: None,
    }
}

fn parent<'a>(doc: &'a mut Value, segs: &[String], path: &str) -> Result<&'a mut Value, ApiError> {
    let mut cur = doc;
    for s in segs {
        cur = match cur {
            Value::Object(m) => m.get_mut(s),
            Value::Array(a) => s.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| unprocessable(format!("doc is missing path: \"{path}\": missing value")))?;
    }
    Ok(cur)
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), ApiError> {
    let segs = split(path)?;
    let Some((last, init)) = segs.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent(doc, init, path)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
        }
        Value::Array(a) => {
            let idx = if last == "-" {
                a.len()
            } else {
                last.parse::<usize>()
                    .map_err(|_| unprocessable(format!("invalid array index in {path}")))?
            };
            if idx > a.len() {
                return Err(unprocessable(format!(
                    "add operation does not apply: doc is missing path: \"{path}\": missing value"
                )));
            }
            a.insert(idx, value);
        }
        _ => {
            return Err(unprocessable(format!(
                "add operation does not apply: doc is missing path: \"{path}\": missing value"
            )));
        }
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, ApiError> {
    let segs = split(path)?;
    let missing = || {
        unprocessable(format!(
            "remove operation does not apply: doc is missing path: \"{path}\": missing value"
        ))
    };
    let (last, init) = segs.split_last().ok_or_else(missing)?;
    match parent(doc, init, path).map_err(|_| missing())? {
        Value::Object(m) => m.remove(last).ok_or_else(missing),
        Value::Array(a) => {
            let idx = last
                .parse::<usize>()
                .ok()
                .filter(|i| *i < a.len())
                .ok_or_else(missing)?;
            Ok(a.remove(idx))
        }
        _ => Err(missing()),
    }
}

fn get(doc: &Value, path: &str) -> Option<Value> {
    let ptr = path.to_string();
    doc.pointer(&ptr).cloned()
}

/// Applies every operation or none.
pub fn apply(original: &Value, patch: &Value) -> Result<Value, ApiError> {
    let ops = patch.as_array().ok_or_else(|| {
        ApiError::bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    })?;
    let mut doc = original.clone();
    for op in ops {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op.get("path").and_then(Value::as_str).unwrap_or("");
        let from = op.get("from").and_then(Value::as_str).unwrap_or("");
        let value = || {
            op.get("value").cloned().ok_or_else(|| {
                unprocessable(format!("missing value for {kind} operation on {path}"))
            })
        };
        match kind {
            "add" => add(&mut doc, path, value()?)?,
            "remove" => {
                remove(&mut doc, path)?;
            }
            "replace" => {
                if get(&doc, path).is_none() {
                    return Err(unprocessable(format!(
                        "replace operation does not apply: doc is missing key: {path}: missing value"
                    )));
                }
                remove(&mut doc, path)?;
                add(&mut doc, path, value()?)?;
            }
            "move" => {
                let v = remove(&mut doc, from)?;
                add(&mut doc, path, v)?;
            }
            "copy" => {
                let v = get(&doc, from).ok_or_else(|| unprocessable(format!("copy operation does not apply: doc is missing from path: {from}: missing value")))?;
                add(&mut doc, path, v)?;
            }
            "test" => {
                let want = value()?;
                if get(&doc, path).as_ref() != Some(&want) {
                    return Err(unprocessable(format!(
                        "testing value {path} failed: test failed"
                    )));
                }
            }
            other => return Err(ApiError::bad_request(format!("Unexpected kind: {other}"))),
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn operations_and_atomic_failure() {
        let doc = json!({"a": {"b": [1, 2]}, "c": "x"});
        let out = apply(
            &doc,
            &json!([
                {"op": "add", "path": "/a/b/-", "value": 3},
                {"op": "replace", "path": "/c", "value": "y"},
                {"op": "copy", "from": "/c", "path": "/d"},
                {"op": "move", "from": "/d", "path": "/e~1f"},
                {"op": "remove", "path": "/a/b/0"},
                {"op": "test", "path": "/c", "value": "y"}
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": {"b": [2, 3]}, "c": "y", "e/f": "y"}));
        let err = apply(&doc, &json!([{"op": "test", "path": "/c", "value": "z"}])).unwrap_err();
        assert_eq!((err.code, err.reason), (422, "Invalid"));
        assert!(apply(&doc, &json!([{"op": "remove", "path": "/nope"}])).is_err());
    }
}
