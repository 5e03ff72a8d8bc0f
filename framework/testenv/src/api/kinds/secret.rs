//! Secret (`v1`, namespaced): `stringData` merged into `data` (base64, a `stringData` key wins)
//! and dropped, as upstream's v1 conversion does on every write; `type` defaulted to `Opaque`;
//! the keys a typed Secret must carry (`kubernetes.io/tls`: `tls.crt` and `tls.key`).

use base64::Engine;
use k8s_openapi::api::core::v1 as openapi;
use k8s_pb::api::core::v1 as pb;
use serde_json::{Map, Value};

use crate::api::kind::{
    Admission, Column, Kind, Lifecycle, NameRule, Names, Printer, Protobuf, Rest, Shape, Type,
};
use crate::api::printing::{age, row, text};
use crate::api::status::Cause;

/// Secret.
pub const KIND: Kind = Kind {
    ty: Type::of::<openapi::Secret>(),
    names: Names {
        singular: "secret",
        short: &[],
        categories: &[],
    },
    rest: Rest::PLAIN,
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::Subdomain,
    field_selectors: &[("type", "type")],
    patch_lists: &[],
    admission: Admission {
        defaults: Some(default),
        validate: Some(validate),
        ..Admission::NONE
    },
    printer: Printer {
        columns: &[
            Column::text("Name"),
            Column::text("Type"),
            Column::new("Data", "integer", 0),
            Column::text("Age"),
        ],
        cells,
    },
    protobuf: Protobuf::of::<pb::Secret, pb::SecretList>(),
    apply: Shape {
        maps: &["data", "stringData"],
        ..Shape::NONE
    },
};

/// Converts and defaults a Secret about to be stored.
fn default(obj: &mut Value) {
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
fn validate(obj: &Value, _old: Option<&Value>) -> Vec<Cause> {
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

fn cells(obj: &Value) -> Vec<Value> {
    let n = obj
        .get("data")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    row(
        obj,
        vec![text(obj, "/type").into(), n.into(), age(obj).into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_data_becomes_data_and_tls_needs_its_keys() {
        let mut s = json!({"metadata": {"name": "x"}, "type": "kubernetes.io/tls", "stringData": {"tls.crt": "c"}});
        default(&mut s);
        assert_eq!(s["data"]["tls.crt"], "Yw==");
        assert!(s.get("stringData").is_none());
        let fields: Vec<String> = validate(&s, None).into_iter().map(|c| c.field).collect();
        assert_eq!(fields, ["data[tls.key]"]);
        assert_eq!(cells(&s)[1..3], [json!("kubernetes.io/tls"), json!(1)]);
    }
}
