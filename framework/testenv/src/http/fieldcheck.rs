//! `fieldValidation` (`Ignore`, `Warn` — the default — and `Strict`) on create, update and
//! patch: the fields of a request body that the type's schema does not know, reported as
//! upstream's strict decoder words them (`unknown field "spec.foo"`): a 400 BadRequest under
//! `Strict`, one `Warning` header each under `Warn`. Built-in kinds are checked against their
//! generated schema (`api::openapi`), custom resources against their CRD's structural
//! schema (where the fields pruning would drop are the unknown ones).

use serde_json::Value;

use crate::api::body::summarize;
use crate::api::openapi::{self as builtin, KindSchema};
use crate::api::status::{ApiError, Cause, go_quote};
use crate::api::types::Served;
use crate::patch::PatchKind;

/// The `fieldValidation` directive of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    /// Unknown fields are accepted silently.
    Ignore,
    /// Unknown fields are accepted with a warning each (upstream's default).
    Warn,
    /// Unknown fields fail the request.
    Strict,
}

impl Directive {
    /// The directive of a write to `sub` (the subresource, if any): the query parameter's value,
    /// where anything but the three directives (or nothing) is a 422, as upstream's
    /// `ValidateFieldValidation`; `options` is the kind of options the verb takes
    /// (`CreateOptions`, `UpdateOptions`, `PatchOptions`). A `/scale` body is an
    /// `autoscaling/v1` Scale, not the resource, and is not checked.
    pub fn of_request(
        value: Option<&str>,
        options: &str,
        sub: Option<&str>,
    ) -> Result<Directive, ApiError> {
        let d = Directive::parse(value, options)?;
        Ok(if sub == Some("scale") {
            Directive::Ignore
        } else {
            d
        })
    }

    fn parse(value: Option<&str>, options: &str) -> Result<Directive, ApiError> {
        match value.unwrap_or("") {
            "" | "Warn" => Ok(Directive::Warn),
            "Ignore" => Ok(Directive::Ignore),
            "Strict" => Ok(Directive::Strict),
            other => Err(ApiError::invalid(
                "meta.k8s.io",
                options,
                "",
                vec![Cause::not_supported(
                    "fieldValidation",
                    &go_quote(other),
                    &["", "Ignore", "Strict", "Warn"],
                )],
            )),
        }
    }
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The schema a type's objects are checked against.
enum Schema {
    Builtin(std::sync::Arc<KindSchema>),
    Custom(Value),
}

fn schema_of(rt: &Served) -> Option<Schema> {
    match rt.custom() {
        Some(c) => c.openapi.clone().map(Schema::Custom),
        None => builtin::schema(rt.group(), rt.version(), rt.kind()).map(Schema::Builtin),
    }
}

/// Checks a create or update body; returns the warnings to send (`Warn`), or the 400 (`Strict`).
pub fn check_object(
    rt: &Served,
    d: Directive,
    body: &[u8],
    obj: &Value,
) -> Result<Vec<String>, ApiError> {
    if d == Directive::Ignore {
        return Ok(Vec::new());
    }
    let unknown = unknown_fields(rt, obj, false);
    outcome(d, unknown, |msg| {
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        let version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .map(|v| v.rsplit('/').next().unwrap_or(v))
            .unwrap_or("");
        if kind.is_empty() {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): {msg} ({})",
                rt.kind(),
                summarize(body)
            ))
        } else {
            ApiError::bad_request(format!(
                "{kind} in version {} cannot be handled as a {}: {msg}",
                go_quote(version),
                rt.kind()
            ))
        }
    })
}

/// Checks a JSON merge or strategic merge patch (the fields it sets; JSON patches are not
/// checked); `Strict` fails with upstream's 422 on the `patch` field.
pub fn check_patch(
    rt: &Served,
    d: Directive,
    kind: PatchKind,
    body: &[u8],
) -> Result<Vec<String>, ApiError> {
    if d == Directive::Ignore || !matches!(kind, PatchKind::Merge | PatchKind::Strategic) {
        return Ok(Vec::new());
    }
    let Ok(patch) = serde_json::from_slice::<Value>(body) else {
        return Ok(Vec::new());
    };
    let unknown = unknown_fields(rt, &patch, true);
    outcome(d, unknown, |msg| {
        ApiError::invalid(
            "",
            "",
            "",
            vec![Cause::invalid(
                "patch",
                &go_quote(&String::from_utf8_lossy(body)),
                &msg,
            )],
        )
    })
}

fn outcome(
    d: Directive,
    unknown: Vec<String>,
    error: impl FnOnce(String) -> ApiError,
) -> Result<Vec<String>, ApiError> {
    let messages: Vec<String> = unknown
        .iter()
        .map(|p| format!("unknown field {}", go_quote(p)))
        .collect();
    if messages.is_empty() || d == Directive::Warn {
        return Ok(messages);
    }
    Err(error(format!(
        "strict decoding error: {}",
        messages.join(", ")
    )))
}

/// The dotted paths (`spec.ports[0].foo`) of the fields of `obj` its type does not know.
/// `patch`: skip strategic-merge directives (`$patch`, `$setElementOrder/...`) and `null`s
/// (a patch deleting a field sets no field).
pub fn unknown_fields(rt: &Served, obj: &Value, patch: bool) -> Vec<String> {
    let mut out = Vec::new();
    match schema_of(rt) {
        Some(Schema::Builtin(s)) => {
            if let Some(root) = s.root_schema() {
                walk(&|v| s.resolve(v), root, obj, "", patch, &mut out);
            }
        }
        Some(Schema::Custom(root)) => {
            // apiVersion, kind and metadata are the server's, whatever the schema says; metadata
            // is an ObjectMeta (its schema from any built-in kind's definitions).
            if let Value::Object(m) = obj {
                let mut rest = m.clone();
                for k in ["apiVersion", "kind", "metadata"] {
                    rest.remove(k);
                }
                let meta = builtin::schema("", "v1", "ConfigMap");
                if let (Some(s), Some(obj_meta)) = (&meta, m.get("metadata")) {
                    let name = format!("{}{OBJECT_META}", builtin::REF_PREFIX);
                    let schema = serde_json::json!({ "$ref": name });
                    walk(
                        &|v| s.resolve(v),
                        &schema,
                        obj_meta,
                        "metadata",
                        patch,
                        &mut out,
                    );
                }
                walk(&|v| v, &root, &Value::Object(rest), "", patch, &mut out);
            }
        }
        None => {}
    }
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn walk<'a>(
    resolve: &dyn Fn(&'a Value) -> &'a Value,
    schema: &'a Value,
    obj: &Value,
    path: &str,
    patch: bool,
    out: &mut Vec<String>,
) {
    let schema = resolve(schema);
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    match obj {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            if schema.get("additionalProperties") == Some(&Value::Bool(true)) {
                return;
            }
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            let embedded = schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
            if props.is_none() && extra.is_none() {
                // No declared fields (RawExtension, an untyped object): anything goes.
                return;
            }
            for (k, v) in m {
                if patch && (k.starts_with('$') || v.is_null()) {
                    continue;
                }
                match (props.and_then(|p| p.get(k)), extra) {
                    (Some(s), _) | (None, Some(s)) => {
                        walk(resolve, s, v, &join(path, k), patch, out)
                    }
                    (None, None)
                        if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") => {
                    }
                    (None, None) => out.push(join(path, k)),
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    walk(resolve, s, v, &format!("{path}[{i}]"), patch, out);
                }
            }
        }
        _ => {}
    }
}
