//! Kubernetes `Status` error bodies: the one type every handler returns on failure, rendered with
//! the exact `reason`, `code`, message wording and `details` layout kube-apiserver uses, so clients
//! (kube-rs `ErrorResponse`, client-go `apierrors.Is*`, kubectl) classify our errors as they would
//! the real server's.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

/// A failed API call, carried from the handler that detects it to the HTTP response.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status and `Status.code`.
    pub code: u16,
    /// `Status.reason` (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, ...; any string an
    /// admission webhook's denial names).
    pub reason: Cow<'static, str>,
    /// `Status.message`, worded as upstream words it.
    pub message: String,
    /// `Status.details`, when upstream sends one.
    pub details: Option<Value>,
    /// Seconds for the `Retry-After` header and `details.retryAfterSeconds`.
    pub retry_after: Option<u64>,
}

/// One `details.causes` entry of a 422 Invalid Status.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueForbidden`, ...
    pub reason: &'static str,
    /// The message without the field prefix, e.g. `Required value: ...`.
    pub message: String,
    /// The field path, e.g. `metadata.name`.
    pub field: String,
}

impl Cause {
    /// An `Invalid value: <v>: <detail>` cause; `value` is already rendered the way Go's `%#v` would.
    pub fn invalid(field: impl Into<String>, value: &str, detail: &str) -> Cause {
        Cause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {value}: {detail}"),
            field: field.into(),
        }
    }

    /// A `Required value` cause.
    pub fn required(field: impl Into<String>, detail: &str) -> Cause {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        Cause {
            reason: "FieldValueRequired",
            message,
            field: field.into(),
        }
    }

    /// A `Forbidden` cause.
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Cause {
        Cause {
            reason: "FieldValueForbidden",
            message: format!("Forbidden: {detail}"),
            field: field.into(),
        }
    }

    /// A `Unsupported value` cause listing the values upstream accepts.
    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Cause {
        let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
        Cause {
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {value}: supported values: {}",
                list.join(", ")
            ),
            field: field.into(),
        }
    }
}

/// Renders a string the way Go's `%q` / `%#v` does for the values we report.
pub fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// Renders decoded JSON the way Go's `%v` prints it (`map[a:1 b:[x y]]`, keys sorted), as
/// upstream's errors quote a patch fragment.
pub fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_value).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_value(&m[k.as_str()])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut m = Map::new();
    // Go omits the empty name (cm-apply-force-missing-manager.txt).
    if !name.is_empty() {
        m.insert("name".into(), Value::String(name.into()));
    }
    if !group.is_empty() {
        m.insert("group".into(), Value::String(group.into()));
    }
    m.insert("kind".into(), Value::String(kind.into()));
    Value::Object(m)
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason: Cow::Borrowed(reason),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// 404 for a missing object; `plural` is the resource (`nodes`), as upstream puts it in `kind`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> ApiError {
        let qualified = qualified(group, plural);
        ApiError {
            details: Some(details(name, group, plural)),
            ..ApiError::new(404, "NotFound", format!("{qualified} \"{name}\" not found"))
        }
    }

    /// 409 on create of an existing name.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> ApiError {
        let qualified = qualified(group, plural);
        ApiError {
            details: Some(details(name, group, plural)),
            ..ApiError::new(
                409,
                "AlreadyExists",
                format!("{qualified} \"{name}\" already exists"),
            )
        }
    }

    /// 409 on an optimistic-concurrency or precondition failure.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> ApiError {
        let qualified = qualified(group, plural);
        ApiError {
            details: Some(details(name, group, plural)),
            ..ApiError::new(
                409,
                "Conflict",
                format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
            )
        }
    }

    /// 409 for a server-side apply that would change other managers' fields; `causes` are
    /// `FieldManagerConflict` entries.
    pub fn apply_conflict(message: String, causes: Vec<Value>) -> ApiError {
        ApiError {
            details: Some(json!({ "causes": causes })),
            ..ApiError::new(409, "Conflict", message)
        }
    }

    /// The stale-resourceVersion conflict message.
    pub fn stale(group: &str, plural: &str, name: &str) -> ApiError {
        ApiError::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid with field causes; `kind` is the object kind (`Node`).
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> ApiError {
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let summary = if causes.len() == 1 {
            format!("{}: {}", causes[0].field, causes[0].message)
        } else {
            let parts: Vec<String> = causes
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect();
            format!("[{}]", parts.join(", "))
        };
        let mut d = details(name, group, kind);
        let list: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        if let Value::Object(m) = &mut d {
            m.insert("causes".into(), Value::Array(list));
        }
        ApiError {
            details: Some(d),
            ..ApiError::new(
                422,
                "Invalid",
                format!("{qualified_kind} \"{name}\" is invalid: {summary}"),
            )
        }
    }

    /// 413 RequestEntityTooLarge, as upstream's `NewRequestEntityTooLargeError`.
    pub fn too_large(message: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: {message}"),
        )
    }

    /// etcd refusing an object over its request limit, which upstream passes on as a 500 with
    /// no reason.
    pub fn storage_too_large() -> ApiError {
        ApiError::new(500, "", "etcdserver: request is too large")
    }

    /// 400 BadRequest with no details.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 403 Forbidden (e.g. deleting an immortal namespace).
    pub fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> ApiError {
        let qualified = qualified(group, plural);
        ApiError {
            details: Some(details(name, group, plural)),
            ..ApiError::new(
                403,
                "Forbidden",
                format!("{qualified} \"{name}\" is forbidden: {why}"),
            )
        }
    }

    /// 405 for a verb the resource does not serve.
    pub fn method_not_allowed() -> ApiError {
        ApiError {
            details: Some(json!({})),
            ..ApiError::new(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        }
    }

    /// 404 for a path that names no resource (upstream answers `404 page not found` in plain text
    /// for unknown groups; for unknown resources of a known group it sends this Status).
    pub fn no_route() -> ApiError {
        ApiError {
            details: Some(json!({})),
            ..ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        }
    }

    /// 415 for a patch content type the server does not implement (server-side apply included).
    pub fn unsupported_media_type() -> ApiError {
        ApiError {
            details: Some(json!({})),
            ..ApiError::new(415, "UnsupportedMediaType", "415: Unsupported Media Type")
        }
    }

    /// 406 when `Accept` names no media type the resource is served in.
    pub fn not_acceptable(accepted: &str) -> ApiError {
        ApiError::new(
            406,
            "NotAcceptable",
            format!("only the following media types are accepted: {accepted}"),
        )
    }

    /// 406 for a conversion that does not fit what was asked for (a list as one
    /// PartialObjectMetadata), with upstream's message.
    pub fn not_acceptable_because(message: String) -> ApiError {
        ApiError::new(406, "NotAcceptable", message)
    }

    /// 415 for a patch type a resource does not take (custom resources take no strategic merge
    /// patch), listing the ones it does as upstream's patch handler does.
    pub fn patch_type_not_accepted(accepted: &[&str]) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 410 Expired for a watch or list from a compacted resourceVersion.
    pub fn expired(requested: u64, oldest: u64) -> ApiError {
        ApiError::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// 410 Expired for a stale `continue` token.
    pub fn continue_expired() -> ApiError {
        ApiError::new(
            410,
            "Expired",
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
        )
    }

    /// 504 for a resourceVersion newer than anything the server has written.
    pub fn too_large_rv(requested: u64, current: u64) -> ApiError {
        ApiError {
            details: Some(
                json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
            ),
            ..ApiError::new(
                504,
                "Timeout",
                format!("Timeout: Too large resource version: {requested}, current: {current}"),
            )
        }
    }

    /// 500 InternalError, used by fault injection and for bodies we cannot serialize.
    pub fn internal(message: &str) -> ApiError {
        ApiError {
            details: Some(json!({"causes": [{"message": message}]})),
            ..ApiError::new(
                500,
                "InternalError",
                format!("Internal error occurred: {message}"),
            )
        }
    }

    /// 500 without a reason: what upstream answers for an error that is no API status (its
    /// `ErrorToAPIStatus` of a plain Go error), e.g. a strategic merge patch's bad directive.
    pub fn unknown(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "", message)
    }

    /// Any status code chosen by fault injection, with the reason upstream pairs with it.
    pub fn injected(code: u16, retry_after: Option<u64>) -> ApiError {
        let (reason, message) = match code {
            429 => (
                "TooManyRequests",
                "Too many requests, please try again later.".to_string(),
            ),
            500 => (
                "InternalError",
                "Internal error occurred: injected fault".to_string(),
            ),
            503 => (
                "ServiceUnavailable",
                "The server is currently unable to handle the request".to_string(),
            ),
            504 => (
                "Timeout",
                "Timeout: request did not complete within the allowed duration".to_string(),
            ),
            409 => (
                "Conflict",
                "Operation cannot be fulfilled: injected fault".to_string(),
            ),
            403 => ("Forbidden", "forbidden: injected fault".to_string()),
            401 => ("Unauthorized", "Unauthorized".to_string()),
            404 => (
                "NotFound",
                "the server could not find the requested resource".to_string(),
            ),
            _ => (
                "InternalError",
                format!("injected fault with status {code}"),
            ),
        };
        let details = retry_after.map(|s| json!({"retryAfterSeconds": s}));
        ApiError {
            code,
            reason: Cow::Borrowed(reason),
            message,
            details,
            retry_after,
        }
    }

    /// The Status object for this error.
    pub fn to_status(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind".into(), "Status".into());
        m.insert("apiVersion".into(), "v1".into());
        m.insert("metadata".into(), json!({}));
        m.insert("status".into(), "Failure".into());
        m.insert("message".into(), Value::String(self.message.clone()));
        if !self.reason.is_empty() {
            m.insert("reason".into(), self.reason.as_ref().into());
        }
        if let Some(d) = &self.details {
            m.insert("details".into(), d.clone());
        }
        m.insert("code".into(), self.code.into());
        Value::Object(m)
    }
}

/// The successful-deletion Status upstream returns when an object is removed at once.
pub fn delete_success(group: &str, plural: &str, name: &str, uid: &str) -> Value {
    let mut d = details(name, group, plural);
    if let Value::Object(m) = &mut d {
        m.insert("uid".into(), Value::String(uid.into()));
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d})
}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}
