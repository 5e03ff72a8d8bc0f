//! Upstream's `authorizer` CEL library (`apiserver/pkg/cel/library/authz.go`) as admission's
//! expressions see it: `authorizer` builds an authorization check (`path`, or `group`,
//! `resource`, `subresource`, `namespace`, `name`; `serviceAccount` to ask for another user;
//! `authorizer.requestResource` for the write's own resource), `check(verb)` asks the server's
//! authorizer, and the decision answers `allowed()`, `reason()`, `errored()` and `error()`.
//! What answers is an [`Authorizer`] the caller gives; without one, everything is allowed, as
//! kube-apiserver's AlwaysAllow authorizer does.

use std::sync::Arc;

use kube_cel::cel::Value as Cel;

/// What cel-go charges for one `check`, at run time and in the estimate: enough that an
/// expression can afford two within its budget.
pub const CHECK_COST: u64 = 350_000;

/// One authorization check, as `check(verb)` asks it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Check {
    /// `serviceAccount(namespace, name)`: ask for this ServiceAccount instead of the requester.
    pub service_account: Option<(String, String)>,
    /// `path(p)`: a non-resource check.
    pub path: Option<String>,
    /// API group.
    pub group: String,
    /// API version (only `requestResource` has one).
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace (empty: all namespaces, or cluster scope).
    pub namespace: String,
    /// Object name (empty: any).
    pub name: String,
    /// The verb `check` was given.
    pub verb: String,
}

/// An authorizer's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// `allowed()`.
    pub allowed: bool,
    /// `reason()`.
    pub reason: String,
    /// `error()` (empty: `errored()` is false).
    pub error: String,
}

/// Decides a [`Check`] for the user a write acts as.
pub trait Authorizer {
    /// The verdict on `check`.
    fn authorize(&self, check: &Check) -> Verdict;
}

/// Which of the library's types a value is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// `kubernetes.authorization.Authorizer`.
    Authorizer,
    /// `kubernetes.authorization.PathCheck`.
    Path,
    /// `kubernetes.authorization.GroupCheck`.
    Group,
    /// `kubernetes.authorization.ResourceCheck`.
    Resource,
    /// `kubernetes.authorization.Decision`.
    Decision(Verdict),
}

/// A value of the library: the check built so far (the root also holds the write's own
/// resource, which `requestResource` selects).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthzValue {
    /// Its type.
    pub stage: Stage,
    /// The check it builds.
    pub check: Check,
}

impl kube_cel::cel::objects::Opaque for AuthzValue {
    fn runtime_type_name(&self) -> &str {
        match self.stage {
            Stage::Authorizer => AUTHORIZER,
            Stage::Path => "kubernetes.authorization.PathCheck",
            Stage::Group => "kubernetes.authorization.GroupCheck",
            Stage::Resource => RESOURCE_CHECK,
            Stage::Decision(_) => "kubernetes.authorization.Decision",
        }
    }
}

/// The type name of `authorizer`.
pub const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";
/// The type name of `authorizer.requestResource`.
pub const RESOURCE_CHECK: &str = "kubernetes.authorization.ResourceCheck";

/// The `authorizer` variable of a write to `request` (group, version, resource, subresource,
/// namespace and name; the rest empty).
pub fn variable(request: Check) -> Cel {
    Cel::Opaque(Arc::new(AuthzValue {
        stage: Stage::Authorizer,
        check: request,
    }))
}
