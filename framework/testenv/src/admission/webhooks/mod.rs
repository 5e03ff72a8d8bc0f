//! Admission webhooks, as kube-apiserver's `k8s.io/apiserver/pkg/admission/plugin/webhook`
//! calls them. `admission::chain` says when; each step is one module here:
//!
//! - `config`: the stored configurations, in the order they are called;
//! - `matching`: whether a webhook is called for a write (operations, groups, versions,
//!   resources and subresources, scope, `namespaceSelector`, `objectSelector`,
//!   `matchPolicy: Equivalent`), its `matchConditions` (CEL, through `api::cel::admission`,
//!   shared with the policies), and the version it is called with;
//! - `equivalent`: an object converted to the version a webhook's rule names;
//! - `review`: the `AdmissionReview` sent (`v1` or `v1beta1`) and the answer's checks;
//! - `call`: one call, `sideEffects` against a dry run, the client in `crate::webhook_client`;
//! - `failure`: every failure and denial in the server's words, under `failurePolicy`;
//! - `mutation`: mutating webhooks one after another, JSON patches, reinvocation;
//! - `validation`: validating webhooks all at once, the first refusal to arrive winning.

mod call;
pub mod config;
pub mod equivalent;
mod failure;
pub mod matching;
pub mod mutation;
mod review;
pub mod validation;

use serde_json::Value;

/// What a write tells its webhooks (upstream's `admission.Attributes`), the same for the
/// mutating and the validating ones.
#[derive(Debug, Clone)]
pub struct Request {
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: &'static str,
    /// The kind written (`autoscaling/v1` `Scale` through `/scale`).
    pub kind: Gvk,
    /// The resource written.
    pub resource: Gvr,
    /// `status`, `scale` or empty.
    pub sub_resource: String,
    /// The name (empty for a create with `generateName`, as upstream sends it).
    pub name: String,
    /// The namespace; for a Namespace other than on create, its own name.
    pub namespace: String,
    /// Who asked.
    pub user: Requester,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `CreateOptions`, `UpdateOptions` or `DeleteOptions`, as the review carries them.
    pub options: Value,
    /// For a custom resource, its CRD's name (for `matchPolicy: Equivalent`).
    pub crd: Option<String>,
    /// Whether the object is a built-in kind, which Go encodes from its struct (an unset
    /// `metadata.creationTimestamp` as `null`).
    pub typed: bool,
}

impl Request {
    /// Webhook configurations (and policies) are never sent to webhooks, so a broken webhook
    /// cannot lock out its own repair.
    pub fn exempt(&self) -> bool {
        self.kind.group == "admissionregistration.k8s.io"
            && matches!(
                self.kind.kind.as_str(),
                "ValidatingWebhookConfiguration"
                    | "MutatingWebhookConfiguration"
                    | "ValidatingAdmissionPolicy"
                    | "ValidatingAdmissionPolicyBinding"
            )
    }

    /// The `request` variable of CEL expressions: upstream's `AdmissionRequest` for the write,
    /// `resource` the one the matching rule named.
    pub fn admission_request(&self, resource: &Gvr) -> Value {
        let kind = serde_json::json!({"group": self.kind.group, "version": self.kind.version, "kind": self.kind.kind});
        let res = |r: &Gvr| serde_json::json!({"group": r.group, "version": r.version, "resource": r.resource});
        serde_json::json!({
            "kind": kind, "resource": res(resource), "subResource": self.sub_resource,
            "requestKind": kind, "requestResource": res(&self.resource),
            "requestSubResource": self.sub_resource,
            "name": self.name, "namespace": self.namespace, "operation": self.operation,
            "userInfo": {"username": self.user.username, "uid": self.user.uid, "groups": self.user.groups},
            "dryRun": self.dry_run, "options": self.options,
        })
    }
}

/// A group, version and kind.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Gvk {
    /// Group (empty for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

/// A group, version and resource.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Gvr {
    /// Group (empty for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
}

impl Gvr {
    /// `group/version`, or `version` for core.
    pub fn api_version(&self) -> String {
        match self.group.as_str() {
            "" => self.version.clone(),
            g => format!("{g}/{}", self.version),
        }
    }
}

/// The user a write acts as, as the review's `userInfo` names them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Requester {
    /// `username`.
    pub username: String,
    /// `uid`.
    pub uid: String,
    /// `groups`.
    pub groups: Vec<String>,
}

/// The objects of a write as webhooks see them: `object` (none on delete) and `oldObject`
/// (none on create).
#[derive(Debug, Clone, Default)]
pub struct Objects {
    /// `object`.
    pub object: Option<Value>,
    /// `oldObject`.
    pub old: Option<Value>,
}
