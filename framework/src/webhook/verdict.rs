//! [`Verdict`]: what an admission handler decides (allow, allow with warnings, deny with a
//! message, an HTTP code, a reason and causes), turned into the `AdmissionResponse` the server
//! passes on: a denial's code, reason and causes reach the client as the webhook set them
//! (`wh-validating-deny-code`), warnings become `Warning` headers (`wh-validating-warnings`).

use kube::core::Status;
use kube::core::admission::AdmissionResponse;
use kube::core::response::{StatusCause, StatusDetails};

/// An admission decision; build it with [`Verdict::allow`] or [`Verdict::deny`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    allowed: bool,
    message: String,
    code: u16,
    reason: String,
    causes: Vec<StatusCause>,
    warnings: Vec<String>,
}

impl Verdict {
    /// Lets the request through.
    pub fn allow() -> Self {
        Verdict {
            allowed: true,
            ..Verdict::default()
        }
    }

    /// Refuses the request; the client sees `admission webhook "NAME" denied the request:
    /// MESSAGE`, with HTTP 403 unless [`Self::with_code`] says otherwise.
    pub fn deny(message: impl Into<String>) -> Self {
        Verdict {
            allowed: false,
            message: message.into(),
            // controller-runtime's `Denied`; with no code the server would answer 400.
            code: 403,
            ..Verdict::default()
        }
    }

    /// The HTTP code of a denial (e.g. 422). The server keeps a code from 400 to 599 and turns
    /// any other into 400 (`wh-validating-deny-code-200`).
    pub fn with_code(mut self, code: u16) -> Self {
        self.code = code;
        self
    }

    /// The machine-readable reason of a denial (e.g. `Invalid`).
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// One cause of a denial: the field it is about (`spec.ranges[0]`), its reason
    /// (`FieldValueInvalid`) and message.
    pub fn with_cause(
        mut self,
        field: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        self.causes.push(StatusCause {
            field: field.into(),
            reason: reason.into(),
            message: message.into(),
        });
        self
    }

    /// A warning for the client, allowed or not (keep it under 120 characters).
    pub fn with_warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// Whether the request is let through.
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// The denial's message (empty when allowed).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Fills `response` (made for the request, so its uid and review version are right).
    pub(crate) fn answer(self, mut response: AdmissionResponse) -> AdmissionResponse {
        response.allowed = self.allowed;
        if !self.warnings.is_empty() {
            response.warnings = Some(self.warnings);
        }
        if self.allowed {
            response.result = Status::default();
            return response;
        }
        let mut status = Status::default().with_code(self.code);
        status.message = self.message;
        status.reason = self.reason;
        if !self.causes.is_empty() {
            status = status.with_details(StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: self.causes,
                retry_after_seconds: 0,
            });
        }
        response.result = status;
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response() -> AdmissionResponse {
        let review: kube::core::admission::AdmissionReview<kube::core::DynamicObject> =
            serde_json::from_value(serde_json::json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {
                    "uid": "u1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                    "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                    "operation": "CREATE", "userInfo": {}, "name": "a", "namespace": "n"
                }
            }))
            .unwrap();
        let request: kube::core::admission::AdmissionRequest<_> = review.try_into().unwrap();
        AdmissionResponse::from(&request)
    }

    #[test]
    fn a_denial_carries_code_reason_and_causes_as_the_capture_answered() {
        let answered = Verdict::deny("size must be even")
            .with_code(422)
            .with_reason("Invalid")
            .with_cause("data.size", "FieldValueInvalid", "must be even")
            .answer(response());
        let json = serde_json::to_value(answered.into_review()).unwrap();
        assert_eq!(
            json["response"],
            serde_json::json!({
                "uid": "u1", "allowed": false,
                "status": {
                    "code": 422, "reason": "Invalid", "message": "size must be even",
                    "details": {"causes": [
                        {"field": "data.size", "message": "must be even", "reason": "FieldValueInvalid"}
                    ]}
                }
            })
        );
    }

    #[test]
    fn a_denial_without_a_code_is_a_403_as_controller_runtimes() {
        let answered = Verdict::deny("no").answer(response());
        let json = serde_json::to_value(answered.into_review()).unwrap();
        assert_eq!(
            json["response"]["status"],
            serde_json::json!({"code": 403, "message": "no"})
        );
    }

    #[test]
    fn an_allowance_carries_only_its_warnings() {
        let answered = Verdict::allow().with_warning("w1").answer(response());
        let json = serde_json::to_value(answered.into_review()).unwrap();
        assert_eq!(
            json["response"],
            serde_json::json!({"uid": "u1", "allowed": true, "status": {}, "warnings": ["w1"]})
        );
    }
}
