//! User impersonation (`Impersonate-User` / `Impersonate-Group` headers, what `kubectl --as`
//! and `--as-group` send), as k8s.io/apiserver's impersonation filter: the requester needs the
//! `impersonate` verb on `users` (or the ServiceAccount in `serviceaccounts`) and on each
//! `groups` entry; the request then runs as the impersonated user.

use http::HeaderMap;

use super::attributes::{self, Attributes};
use super::config::Auth;
use super::rbac;
use super::tokens::UserInfo;
use crate::api::status::ApiError;
use crate::storage::store::Store;

const USER_HEADER: &str = "impersonate-user";
const GROUP_HEADER: &str = "impersonate-group";

/// The user a request acts as: `requester` itself, or whom its impersonation headers name if
/// `requester` may impersonate them (upstream's 403 otherwise).
pub fn act_as(
    store: &Store,
    auth: &Auth,
    requester: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let text = |v: &http::HeaderValue| v.to_str().unwrap_or("").to_string();
    let user = headers.get(USER_HEADER).map(text).filter(|u| !u.is_empty());
    let groups: Vec<String> = headers.get_all(GROUP_HEADER).iter().map(text).collect();
    let Some(name) = user else {
        if groups.is_empty() {
            return Ok(requester);
        }
        return Err(ApiError::internal(&format!(
            "requested groups {groups:?} without impersonating a user"
        )));
    };
    let mut checks = Vec::new();
    let mut impersonated = groups.clone();
    let sa = name
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .filter(|(ns, sa)| !ns.is_empty() && !sa.is_empty() && !sa.contains(':'));
    match sa {
        Some((ns, sa)) => {
            checks.push(target("serviceaccounts", ns, sa));
            if groups.is_empty() {
                impersonated = vec![
                    "system:serviceaccounts".to_string(),
                    format!("system:serviceaccounts:{ns}"),
                ];
            }
        }
        None => checks.push(target("users", "", &name)),
    }
    checks.extend(groups.iter().map(|g| target("groups", "", g)));
    if auth.enforce {
        for check in &checks {
            let d = store.with(|s| rbac::authorize(s, &requester, check));
            if !d.allowed {
                return Err(attributes::forbidden(&requester.name, check, &d.reason));
            }
        }
    }
    let explicit = impersonated
        .iter()
        .any(|g| g == "system:authenticated" || g == "system:unauthenticated");
    if name != "system:anonymous" && !explicit {
        impersonated.push("system:authenticated".into());
    }
    Ok(UserInfo {
        name,
        uid: String::new(),
        groups: impersonated,
    })
}

fn target(resource: &str, namespace: &str, name: &str) -> Attributes {
    Attributes {
        verb: "impersonate".into(),
        resource_request: true,
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..Attributes::default()
    }
}
