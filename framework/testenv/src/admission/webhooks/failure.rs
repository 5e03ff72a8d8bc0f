//! What a webhook's failure or refusal does to a write, in kube-apiserver's words: a failed call
//! (unreachable, timed out, an unreadable or invalid answer) is a 500 `failed calling webhook
//! "<name>": …` under `failurePolicy: Fail` and nothing under `Ignore`; a denial is the
//! webhook's own status, its message after `admission webhook "<name>" denied the request`, its
//! code kept when it is 400 or more and 400 otherwise (`wh-validating-deny-code-200`); anything
//! else (a patch that does not apply, a dry run the webhook may not see) fails the write
//! whatever the policy.

use std::borrow::Cow;

use serde_json::Value;

use crate::api::status::{ApiError, go_quote};

/// Why a webhook call did not end in an allowed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Upstream's `ErrCallingWebhook`: the words after `failed calling webhook "<name>": `.
    /// `failurePolicy: Ignore` lets the write through.
    Calling(String),
    /// A refusal whatever the policy: a denial, or the server's own error.
    Refused(ApiError),
}

impl Failure {
    /// The write's error for this failure of webhook `name`, or `None` when the policy lets
    /// the write through.
    pub fn into_error(self, name: &str, fail_open: bool) -> Option<ApiError> {
        match self {
            Failure::Calling(why) => {
                if fail_open {
                    tracing::warn!(webhook = name, error = %why, "failed calling webhook, failing open");
                    return None;
                }
                Some(ApiError::internal(&format!(
                    "failed calling webhook {}: {why}",
                    go_quote(name)
                )))
            }
            Failure::Refused(e) => Some(e),
        }
    }
}

/// A webhook's denial, as upstream's `ToStatusErr` turns its `status` into the write's error.
pub fn denial(name: &str, status: Option<&Value>) -> ApiError {
    let empty = Value::Object(Default::default());
    let status = status.unwrap_or(&empty);
    let text = |k: &str| status.get(k).and_then(Value::as_str).unwrap_or("");
    let denied = format!("admission webhook {} denied the request", go_quote(name));
    let message = match (text("message"), text("reason")) {
        ("", "") => format!("{denied} without explanation"),
        ("", reason) => format!("{denied}: {reason}"),
        (message, _) => format!("{denied}: {message}"),
    };
    let code = status
        .get("code")
        .and_then(Value::as_i64)
        .filter(|c| *c >= 400)
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(400);
    let details = status.get("details").filter(|d| d.is_object()).cloned();
    let retry_after = details
        .as_ref()
        .and_then(|d| d.get("retryAfterSeconds"))
        .and_then(Value::as_u64)
        .filter(|s| *s > 0);
    ApiError {
        code,
        reason: Cow::Owned(text("reason").to_string()),
        message,
        details,
        retry_after,
    }
}

/// A dry run sent to a webhook whose `sideEffects` are not `None` or `NoneOnDryRun`.
pub fn dry_run_unsupported(name: &str) -> ApiError {
    ApiError::bad_request(format!(
        "admission webhook {} does not support dry run",
        go_quote(name)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn denials_read_as_the_captures_show() {
        // wh-validating-deny-bare.txt
        let bare = denial("deny-bare.wh.example.com", None);
        assert_eq!(
            (bare.code, bare.message.as_str()),
            (
                400,
                "admission webhook \"deny-bare.wh.example.com\" denied the request without explanation"
            )
        );
        // wh-validating-deny-code-200.txt
        let odd = denial("d", Some(&json!({"code": 200, "message": "odd code"})));
        assert_eq!(
            (odd.code, odd.message.as_str()),
            (400, "admission webhook \"d\" denied the request: odd code")
        );
        // wh-validating-deny-code.txt
        let coded = denial(
            "d",
            Some(
                &json!({"code": 422, "reason": "Invalid", "message": "size must be even",
                "details": {"causes": [{"field": "data.size", "message": "must be even", "reason": "FieldValueInvalid"}]}}),
            ),
        );
        assert_eq!(coded.code, 422);
        assert_eq!(coded.reason, "Invalid");
        assert_eq!(
            coded.to_status()["details"],
            json!({"causes": [{"field": "data.size", "message": "must be even", "reason": "FieldValueInvalid"}]})
        );
        let by_reason = denial("d", Some(&json!({"reason": "Forbidden"})));
        assert_eq!(
            by_reason.message,
            "admission webhook \"d\" denied the request: Forbidden"
        );
    }

    #[test]
    fn a_failed_call_fails_closed_or_open() {
        let f = || Failure::Calling("failed to call webhook: boom".into());
        let e = f().into_error("a.example.com", false).unwrap();
        assert_eq!(e.code, 500);
        assert_eq!(
            e.message,
            "Internal error occurred: failed calling webhook \"a.example.com\": failed to call webhook: boom"
        );
        assert_eq!(f().into_error("a.example.com", true), None);
    }
}
