//! [`Review`]: one admission request with its object and old object decoded into the handler's
//! type. The decoding names the field that does not fit (`object: spec.ranges[0].start: ...`),
//! and a request for another kind than the handler's is refused before decoding: a handler
//! registered at the wrong path answers a clear 400, never a panic or a half-read object.

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::Resource;
use kube::core::admission::{AdmissionRequest, Operation};
use kube::core::{DynamicObject, GroupVersionKind, GroupVersionResource};
use serde::de::DeserializeOwned;

use super::verdict::Verdict;

/// An admission request for a `T`, as a [`Validator`](super::Validator) or
/// [`Defaulter`](super::Defaulter) sees it.
#[derive(Clone, Debug)]
pub struct Review<T> {
    /// The request's uid.
    pub uid: String,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: Operation,
    /// The kind the object is sent as.
    pub kind: GroupVersionKind,
    /// The resource the request is for.
    pub resource: GroupVersionResource,
    /// `status`, `scale`... when the request is for a subresource.
    pub sub_resource: Option<String>,
    /// The object's name (empty on a CREATE with `generateName`).
    pub name: String,
    /// The object's namespace, for a namespaced kind.
    pub namespace: Option<String>,
    /// Who asked.
    pub user_info: UserInfo,
    /// Whether the write will not be persisted: a handler with side effects must not act.
    pub dry_run: bool,
    /// The new object (`None` on DELETE).
    pub object: Option<T>,
    /// The stored object (UPDATE and DELETE).
    pub old_object: Option<T>,
}

impl<T: Resource<DynamicType = ()> + DeserializeOwned> Review<T> {
    /// Decodes `request`'s objects as `T`; the error is the denial to answer (400).
    pub(crate) fn decode(request: &AdmissionRequest<DynamicObject>) -> Result<Self, Verdict> {
        let (group, version, kind) = (T::group(&()), T::version(&()), T::kind(&()));
        let sent = &request.kind;
        if sent.group != group || sent.version != version || sent.kind != kind {
            return Err(bad_request(format!(
                "this webhook reviews {}, not {}; check the rules of its webhook configuration",
                gvk(&group, &version, &kind),
                gvk(&sent.group, &sent.version, &sent.kind)
            )));
        }
        Ok(Review {
            uid: request.uid.clone(),
            operation: request.operation.clone(),
            kind: request.kind.clone(),
            resource: request.resource.clone(),
            sub_resource: request.sub_resource.clone(),
            name: request.name.clone(),
            namespace: request.namespace.clone(),
            user_info: request.user_info.clone(),
            dry_run: request.dry_run,
            object: decoded("object", request.object.as_ref())?,
            old_object: decoded("oldObject", request.old_object.as_ref())?,
        })
    }
}

/// `group/version, Kind=kind`, as the server prints a kind.
fn gvk(group: &str, version: &str, kind: &str) -> String {
    match group {
        "" => format!("{version}, Kind={kind}"),
        _ => format!("{group}/{version}, Kind={kind}"),
    }
}

/// A 400 denial, as controller-runtime answers what it cannot decode.
pub(crate) fn bad_request(message: String) -> Verdict {
    Verdict::deny(message)
        .with_code(400)
        .with_reason("BadRequest")
}

/// `object` decoded as `T`, or a 400 naming `field` and the path inside it that did not fit.
fn decoded<T: DeserializeOwned>(
    field: &str,
    object: Option<&DynamicObject>,
) -> Result<Option<T>, Verdict> {
    let Some(object) = object else {
        return Ok(None);
    };
    let value = serde_json::to_value(object)
        .map_err(|e| bad_request(format!("cannot read {field}: {e}")))?;
    serde_path_to_error::deserialize(value)
        .map(Some)
        .map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            match path.as_str() {
                "." => bad_request(format!("cannot decode {field}: {inner}")),
                _ => bad_request(format!("cannot decode {field}: {path}: {inner}")),
            }
        })
}
