//! Secrets: `stringData` merged into `data` (base64, a `stringData` key wins) and dropped, as
//! upstream's v1 conversion does on every write; `type` defaulted to `Opaque`; the keys a
//! typed Secret must carry (`kubernetes.io/tls`: `tls.crt` and `tls.key`).

use base64::Engine;
use serde_json::{Map, Value};

use crate::api::status::Cause;

/// Converts and defaults a Secret about to be stored.
pub fn default(obj: &mut Value) {
    let Some(m) = obj.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(strings)) = m.remove("stringData") {
        let data = m.entry("data").or_insert_with(|| Value::Object(Map::new()));
        if !data.is_object() {
            *data = Value::Object(Map::new());
        }
        if let Some(d) = data.as_object_mut() {
            for (k, v) in strings {
                let text = v.as_str().unwrap_or_default();
                let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                d.insert(k, encoded.into());
            }
        }
    }
    if m.get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        m.insert("type".into(), "Opaque".into());
    }
}

/// The keys the Secret's type requires (upstream's `ValidateSecret`).
pub fn causes(obj: &Value) -> Vec<Cause> {
    let required: &[&str] = match obj.get("type").and_then(Value::as_str) {
        Some("kubernetes.io/tls") => &["tls.crt", "tls.key"],
        Some("kubernetes.io/ssh-auth") => &["ssh-privatekey"],
        _ => &[],
    };
    let data = obj.get("data").and_then(Value::as_object);
    required
        .iter()
        .filter(|k| data.is_none_or(|d| !d.contains_key(**k)))
        .map(|k| Cause::required(format!("data[{k}]"), ""))
        .collect()
}
