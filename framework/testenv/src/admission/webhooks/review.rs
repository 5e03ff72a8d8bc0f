//! The `AdmissionReview` a webhook gets (`admission.k8s.io/v1`, or `v1beta1` when the webhook
//! asks only for that; the first of its `admissionReviewVersions` the server knows), and its
//! answer read and checked as upstream's `VerifyAdmissionResponse` checks it: a `response`, the
//! request's uid and `kind` (v1 only), a patch only from a mutating webhook and only with its
//! `patchType`.

use serde_json::{Map, Value, json};

use super::matching::Invocation;
use super::{Objects, Request};
use crate::webhook_client::{self, Answer, CallError};

/// Where upstream's decoder for webhook answers says it was made, in its "no kind" errors.
const SCHEME: &str = "k8s.io/apiserver/pkg/util/webhook/client.go:69";
const V1: &str = "admission.k8s.io/v1";
const V1BETA1: &str = "admission.k8s.io/v1beta1";

/// The review version to send: the first of the webhook's the server knows.
pub fn version(inv: &Invocation) -> Option<&'static str> {
    inv.hook
        .review_versions
        .iter()
        .find_map(|v| match v.as_str() {
            "v1" => Some(V1),
            "v1beta1" => Some(V1BETA1),
            _ => None,
        })
}

/// The review sent, `uid` naming it.
pub fn request(
    api_version: &str,
    uid: &str,
    inv: &Invocation,
    req: &Request,
    objects: &Objects,
) -> Value {
    let mut r = Map::new();
    r.insert("uid".into(), uid.into());
    r.insert(
        "kind".into(),
        gvk(&inv.kind.group, &inv.kind.version, &inv.kind.kind),
    );
    r.insert(
        "resource".into(),
        json!({"group": inv.resource.group, "version": inv.resource.version, "resource": inv.resource.resource}),
    );
    if !req.sub_resource.is_empty() {
        r.insert("subResource".into(), req.sub_resource.clone().into());
    }
    r.insert(
        "requestKind".into(),
        gvk(&req.kind.group, &req.kind.version, &req.kind.kind),
    );
    r.insert(
        "requestResource".into(),
        json!({"group": req.resource.group, "version": req.resource.version, "resource": req.resource.resource}),
    );
    if !req.sub_resource.is_empty() {
        r.insert("requestSubResource".into(), req.sub_resource.clone().into());
    }
    if !req.name.is_empty() {
        r.insert("name".into(), req.name.clone().into());
    }
    if !req.namespace.is_empty() {
        r.insert("namespace".into(), req.namespace.clone().into());
    }
    r.insert("operation".into(), req.operation.into());
    let mut user = Map::new();
    user.insert("username".into(), req.user.username.clone().into());
    if !req.user.uid.is_empty() {
        user.insert("uid".into(), req.user.uid.clone().into());
    }
    if !req.user.groups.is_empty() {
        user.insert("groups".into(), req.user.groups.clone().into());
    }
    r.insert("userInfo".into(), Value::Object(user));
    let encoded = |o: &Option<Value>| o.clone().map_or(Value::Null, |o| go_encoded(req, o));
    r.insert("object".into(), encoded(&objects.object));
    r.insert("oldObject".into(), encoded(&objects.old));
    r.insert("dryRun".into(), req.dry_run.into());
    r.insert("options".into(), req.options.clone());
    json!({"kind": "AdmissionReview", "apiVersion": api_version, "request": r})
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

/// An object as Go encodes it from its struct: a built-in kind's unset creation time is `null`.
fn go_encoded(req: &Request, mut object: Value) -> Value {
    if req.typed
        && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.entry("creationTimestamp").or_insert(Value::Null);
    }
    object
}

/// A webhook's answer, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// `allowed`.
    pub allowed: bool,
    /// The decoded `patch` (empty: none).
    pub patch: Vec<u8>,
    /// `patchType` (`JSONPatch` for a v1beta1 patch).
    pub patch_type: String,
    /// `status`, the refusal's details.
    pub status: Option<Value>,
    /// `warnings`.
    pub warnings: Vec<String>,
}

/// Why an answer is refused: it could not be read (`failed to call webhook: …`) or read but
/// wrong (`received invalid webhook response: …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadAnswer {
    /// The client could not decode it.
    Call(CallError),
    /// It decoded but breaks the contract.
    Invalid(String),
}

/// Reads `answer` to a review of `api_version` named `uid`.
pub fn verdict(
    answer: &Answer,
    api_version: &str,
    uid: &str,
    mutating: bool,
) -> Result<Verdict, BadAnswer> {
    let other = if api_version == V1 { V1BETA1 } else { V1 };
    let review = webhook_client::decode(
        answer,
        &[(api_version, "AdmissionReview"), (other, "AdmissionReview")],
        SCHEME,
    )
    .map_err(BadAnswer::Call)?;
    let go_type = if api_version == V1 { "v1" } else { "v1beta1" };
    let typed = |why: String| BadAnswer::Call(CallError::Call(why));
    let response = match review.get("response") {
        None | Some(Value::Null) => None,
        Some(Value::Object(r)) => Some(r),
        Some(other) => {
            return Err(typed(webhook_client::gojson::type_error(
                other,
                "AdmissionReview",
                "response",
                &format!("{go_type}.AdmissionResponse"),
            )));
        }
    };
    let fields = match response {
        Some(r) => Fields::read(r).map_err(typed)?,
        None => return Err(BadAnswer::Invalid("webhook response was absent".into())),
    };
    let invalid = |m: String| Err(BadAnswer::Invalid(m));
    if api_version == V1 {
        if fields.uid != uid {
            return invalid(format!(
                "expected response.uid={}, got {}",
                crate::api::status::go_quote(uid),
                crate::api::status::go_quote(&fields.uid)
            ));
        }
        let kind = review.get("kind").and_then(Value::as_str).unwrap_or("");
        let version = review
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if (version, kind) != (V1, "AdmissionReview") {
            let (group, v) = version.rsplit_once('/').unwrap_or(("", version));
            return invalid(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{v}, Kind={kind}"
            ));
        }
    }
    let mut verdict = Verdict {
        allowed: fields.allowed,
        status: fields.status,
        warnings: fields.warnings,
        ..Verdict::default()
    };
    if api_version != V1 {
        if mutating && !fields.patch.is_empty() {
            verdict.patch = fields.patch;
            verdict.patch_type = "JSONPatch".into();
        }
        return Ok(verdict);
    }
    match (mutating, fields.patch.is_empty(), fields.patch_type) {
        (true, false, None) => {
            invalid("webhook returned response.patch but not response.patchType".into())
        }
        (true, true, Some(_)) => {
            invalid("webhook returned response.patchType but not response.patch".into())
        }
        (true, _, Some(t)) if t.is_empty() => invalid(format!(
            "webhook returned invalid response.patchType of {}",
            crate::api::status::go_quote(&t)
        )),
        (true, _, t) => {
            verdict.patch = fields.patch;
            verdict.patch_type = t.unwrap_or_default();
            Ok(verdict)
        }
        (false, false, _) => invalid("validating webhook may not return response.patch".into()),
        (false, true, Some(_)) => {
            invalid("validating webhook may not return response.patchType".into())
        }
        (false, true, None) => Ok(verdict),
    }
}

/// The `response` fields, with Go's type errors.
struct Fields {
    uid: String,
    allowed: bool,
    patch: Vec<u8>,
    patch_type: Option<String>,
    status: Option<Value>,
    warnings: Vec<String>,
}

impl Fields {
    fn read(r: &Map<String, Value>) -> Result<Fields, String> {
        use webhook_client::gojson::type_error;
        let wrong = |k: &str, v: &Value, want: &str| {
            type_error(v, "AdmissionResponse", &format!("response.{k}"), want)
        };
        let string = |k: &str, want: &str| match r.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(wrong(k, v, want)),
        };
        let allowed = match r.get("allowed") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => return Err(wrong("allowed", v, "bool")),
        };
        let patch = match string("patch", "[]uint8")? {
            None => Vec::new(),
            Some(b64) => base64_go(&b64)?,
        };
        let status = match r.get("status") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(v) => return Err(wrong("status", v, "v1.Status")),
        };
        let warnings = match r.get("warnings") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut out = Vec::new();
                for w in items {
                    match w {
                        Value::String(s) => out.push(s.clone()),
                        v => return Err(wrong("warnings", v, "string")),
                    }
                }
                out
            }
            Some(v) => return Err(wrong("warnings", v, "[]string")),
        };
        Ok(Fields {
            uid: string("uid", "types.UID")?.unwrap_or_default(),
            allowed,
            patch,
            patch_type: string("patchType", "v1.PatchType")?,
            status,
            warnings,
        })
    }
}

/// Go's `[]byte` from JSON: standard base64, `illegal base64 data at input byte N` otherwise.
fn base64_go(s: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    STANDARD.decode(s).map_err(|e| {
        let at = match e {
            base64::DecodeError::InvalidByte(at, _)
            | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            _ => s.len(),
        };
        format!("illegal base64 data at input byte {at}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn answer(body: Value) -> Answer {
        Answer {
            url: "https://127.0.0.1:1/x?timeout=5s".into(),
            status: 200,
            content_type: Some("application/json".into()),
            body: Bytes::from(body.to_string()),
        }
    }

    fn refused(body: Value, mutating: bool) -> BadAnswer {
        verdict(&answer(body), V1, "u-1", mutating).unwrap_err()
    }

    #[test]
    fn answers_are_checked_as_upstream_checks_them() {
        let review = |r: Value| json!({"apiVersion": V1, "kind": "AdmissionReview", "response": r});
        // wh-validating-no-response.txt
        assert_eq!(
            refused(json!({"apiVersion": V1, "kind": "AdmissionReview"}), false),
            BadAnswer::Invalid("webhook response was absent".into())
        );
        // wh-validating-wrong-uid.txt
        assert_eq!(
            refused(
                review(json!({"uid": "not-the-uid", "allowed": true})),
                false
            ),
            BadAnswer::Invalid("expected response.uid=\"u-1\", got \"not-the-uid\"".into())
        );
        // wh-mutating-no-patchtype.txt
        assert_eq!(
            refused(
                review(json!({"uid": "u-1", "allowed": true, "patch": "W10="})),
                true
            ),
            BadAnswer::Invalid("webhook returned response.patch but not response.patchType".into())
        );
        assert_eq!(
            refused(
                review(
                    json!({"uid": "u-1", "allowed": true, "patch": "W10=", "patchType": "JSONPatch"})
                ),
                false
            ),
            BadAnswer::Invalid("validating webhook may not return response.patch".into())
        );
        assert_eq!(
            refused(review(json!({"uid": "u-1", "allowed": "yes"})), false),
            BadAnswer::Call(CallError::Call(
                "json: cannot unmarshal string into Go struct field AdmissionResponse.response.allowed of type bool".into()
            ))
        );
        assert_eq!(
            refused(json!({"response": {"uid": "u-1", "allowed": true}}), false),
            BadAnswer::Invalid(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got /, Kind=".into()
            )
        );
        let ok = verdict(
            &answer(review(json!({"uid": "u-1", "allowed": true, "patch": "W10=", "patchType": "JSONPatch", "warnings": ["w"]}))),
            V1,
            "u-1",
            true,
        )
        .unwrap();
        assert_eq!(
            (ok.patch.as_slice(), ok.warnings.as_slice()),
            (&b"[]"[..], &["w".to_string()][..])
        );
    }

    #[test]
    fn a_v1beta1_answer_needs_no_uid_and_its_patch_is_a_json_patch() {
        let body = json!({"apiVersion": V1BETA1, "kind": "AdmissionReview", "response": {"allowed": true, "patch": "W10="}});
        let v = verdict(&answer(body), V1BETA1, "u-1", true).unwrap();
        assert_eq!(v.patch_type, "JSONPatch");
    }
}
