//! What kube-apiserver's typed decoding refuses in a built-in kind's body before anything else
//! looks at it: a `kind`/`apiVersion` that is not the URL's type (400, in the words of the
//! scheme's conversion and registration errors) and a field whose JSON type is not its Go type
//! (400, Go's `json: cannot unmarshal number into Go struct field NodeSpec.spec.providerID of
//! type string`). The field types come from the kind's generated schema (`api::openapi`),
//! the one `fieldcheck` walks; custom resources are checked by their structural schema instead.

use serde_json::Value;

use crate::api::kinds::TABLE;
use crate::api::openapi::{self as builtin, KindSchema};
use crate::api::status::{ApiError, go_quote};
use crate::api::types::Served;

const SCHEME: &str = "k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30";

/// The 400 of a create or update body its type cannot be decoded from.
pub fn check_body(rt: &Served, obj: &Value) -> Result<(), ApiError> {
    if rt.custom().is_some() {
        return Ok(());
    }
    let s = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("");
    let (mut api_version, mut kind) = (s("apiVersion").to_string(), s("kind").to_string());
    // Upstream's defaulting of the body's group/version/kind from the URL.
    if kind.is_empty() {
        kind = rt.kind().to_string();
    }
    if api_version.is_empty() {
        api_version = rt.api_version();
    }
    let version = api_version.rsplit('/').next().unwrap_or("").to_string();
    let cannot = |why: String| {
        ApiError::bad_request(format!(
            "{kind} in version {} cannot be handled as a {}: {why}",
            go_quote(&version),
            rt.kind()
        ))
    };
    if api_version != rt.api_version() || kind != rt.kind() {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let known = TABLE
            .iter()
            .any(|t| t.ty.group == group && t.ty.version == version && t.ty.kind == kind);
        if !known {
            return Err(cannot(format!(
                "no kind {} is registered for version {} in scheme {}",
                go_quote(&kind),
                go_quote(&api_version),
                go_quote(SCHEME)
            )));
        }
        if kind == rt.kind() {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                rt.api_version()
            )));
        }
        return Err(cannot(format!(
            "converting ({version}.{kind}) to ({}.{}): unknown conversion",
            internal_package(rt.group()),
            rt.kind()
        )));
    }
    type_error(rt, obj).map_or(Ok(()), |e| Err(cannot(e)))
}

/// The Go package of a group's internal types, as conversion errors name it.
fn internal_package(group: &str) -> &str {
    match group {
        "" | "events.k8s.io" => "core",
        g => g.split('.').next().unwrap_or(g),
    }
}

/// Go's message for the first field of `obj` whose JSON type its Go type cannot take.
pub fn type_error(rt: &Served, obj: &Value) -> Option<String> {
    if rt.custom().is_some() {
        return None;
    }
    let schema = builtin::schema(rt.group(), rt.version(), rt.kind())?;
    let root = schema.root_schema()?;
    let at = At {
        schema: &schema,
        path: String::new(),
        owner: short_name(&schema.root).to_string(),
    };
    walk(&at, root, obj)
}

/// Where the walk is: the field path of JSON names and the innermost struct.
struct At<'a> {
    schema: &'a KindSchema,
    path: String,
    owner: String,
}

fn short_name(def: &str) -> &str {
    def.rsplit('.').next().unwrap_or(def)
}

/// `v1.NodeSpec` for `io.k8s.api.core.v1.NodeSpec`.
fn go_type_name(def: &str) -> String {
    let mut parts = def.rsplit('.');
    let name = parts.next().unwrap_or(def);
    format!("{}.{name}", parts.next().unwrap_or(""))
}

fn def_name(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(builtin::REF_PREFIX))
}

/// The Go type a schema node decodes into, as Go names it in the error.
fn go_type(at: &At<'_>, schema: &Value) -> String {
    if let Some(def) = def_name(schema) {
        let resolved = at.schema.resolve(schema);
        if resolved.get("properties").is_some() || def.ends_with("Quantity") {
            return go_type_name(def);
        }
        return go_type(at, resolved);
    }
    let item = |k: &str| schema.get(k).map(|s| go_type(at, s)).unwrap_or_default();
    match schema.get("type").and_then(Value::as_str) {
        Some("string") if schema.get("format").and_then(Value::as_str) == Some("byte") => {
            "[]uint8".into()
        }
        Some("string") => "string".into(),
        Some("boolean") => "bool".into(),
        Some("number") => "float64".into(),
        Some("integer") => schema
            .get("format")
            .and_then(Value::as_str)
            .unwrap_or("int64")
            .into(),
        Some("array") => format!("[]{}", item("items")),
        Some("object") if schema.get("additionalProperties").is_some() => {
            format!("map[string]{}", item("additionalProperties"))
        }
        _ => "interface {}".into(),
    }
}

fn json_kind(v: &Value) -> String {
    match v {
        Value::String(_) => "string".into(),
        Value::Number(_) => "number".into(),
        Value::Bool(_) => "bool".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Null => "null".into(),
    }
}

fn walk(at: &At<'_>, schema: &Value, v: &Value) -> Option<String> {
    if v.is_null() {
        // Go decodes null into anything as its zero value.
        return None;
    }
    let def = def_name(schema);
    let node = at.schema.resolve(schema);
    let untyped = [
        "RawExtension",
        ".JSON",
        "OrArray",
        "OrBool",
        "OrStringArray",
    ];
    if def.is_some_and(|d| untyped.iter().any(|u| d.ends_with(u)))
        || node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
        || node.get("anyOf").is_some()
        || node.get("oneOf").is_some()
    {
        // Raw JSON fields (RawExtension, apiextensions' JSON and its "or" unions) take anything.
        return None;
    }
    if node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        || def.is_some_and(|d| d.ends_with("Quantity"))
    {
        // IntOrString and Quantity take strings and numbers.
        return (!v.is_string() && !v.is_number()).then(|| mismatch(at, schema, v));
    }
    let ty = node.get("type").and_then(Value::as_str);
    let ok = match (ty, v) {
        (Some("string"), Value::String(_))
        | (Some("boolean"), Value::Bool(_))
        | (Some("number"), Value::Number(_))
        | (Some("array"), Value::Array(_))
        | (Some("object"), Value::Object(_))
        | (None, _) => true,
        (Some("integer"), Value::Number(n)) => integer_fits(node, n),
        _ => false,
    };
    if !ok {
        return Some(mismatch(at, schema, v));
    }
    match v {
        Value::Object(fields) => {
            let owner = match def {
                Some(d) if node.get("properties").is_some() => short_name(d).to_string(),
                _ => at.owner.clone(),
            };
            let props = node.get("properties").and_then(Value::as_object);
            let extra = node.get("additionalProperties").filter(|a| a.is_object());
            for (k, fv) in fields {
                let (sub, path) = match (props.and_then(|p| p.get(k)), extra) {
                    (Some(s), _) => (s, join(&at.path, k)),
                    (None, Some(s)) => (s, at.path.clone()),
                    (None, None) => continue,
                };
                let inner = At {
                    schema: at.schema,
                    path,
                    owner: owner.clone(),
                };
                if let Some(e) = walk(&inner, sub, fv) {
                    return Some(e);
                }
            }
            None
        }
        Value::Array(items) => {
            let sub = node.get("items")?;
            items.iter().find_map(|item| walk(at, sub, item))
        }
        _ => None,
    }
}

fn integer_fits(node: &Value, n: &serde_json::Number) -> bool {
    match node.get("format").and_then(Value::as_str) {
        Some("int32") => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
        _ => n.is_i64(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Go's `UnmarshalTypeError` text.
fn mismatch(at: &At<'_>, schema: &Value, v: &Value) -> String {
    let value = match v {
        Value::Number(n) if at.schema.resolve(schema).get("type") == Some(&"integer".into()) => {
            format!("number {n}")
        }
        other => json_kind(other),
    };
    let ty = go_type(at, schema);
    if at.path.is_empty() {
        return format!("json: cannot unmarshal {value} into Go value of type {ty}");
    }
    format!(
        "json: cannot unmarshal {value} into Go struct field {}.{} of type {ty}",
        at.owner, at.path
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn served(kind: &str) -> Served {
        let t = TABLE
            .iter()
            .find(|t| t.ty.kind == kind && t.ty.group.is_empty());
        Served::Builtin(t.unwrap())
    }

    #[test]
    fn wrong_json_types_are_go_decode_errors() {
        let node = served("Node");
        let e = |v: Value| type_error(&node, &v);
        assert_eq!(
            e(json!({"metadata": {"labels": {"a": 1}}})).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
            )
        );
        assert_eq!(
            e(json!({"spec": {"providerID": 123}})).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field NodeSpec.spec.providerID of type string"
            )
        );
        assert_eq!(
            e(json!({"spec": {"taints": {"key": "a"}}})).as_deref(),
            Some(
                "json: cannot unmarshal object into Go struct field NodeSpec.spec.taints of type []v1.Taint"
            )
        );
        assert_eq!(
            e(json!({"spec": "x"})).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field Node.spec of type v1.NodeSpec"
            )
        );
        let ok = json!({"metadata": {"labels": {"a": "1"}, "creationTimestamp": null},
            "status": {"capacity": {"cpu": 4, "memory": "1Gi"}}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}});
        assert_eq!(e(ok), None);
        let svc = served("Service");
        let port = json!({"spec": {"ports": [{"port": 80, "targetPort": "http"}, {"port": 1.5}]}});
        assert_eq!(
            type_error(&svc, &port).as_deref(),
            Some(
                "json: cannot unmarshal number 1.5 into Go struct field ServicePort.spec.ports.port of type int32"
            )
        );
    }
}
