//! RBAC as the `authorizer` of admission's CEL asks it: a check built by the expression
//! (`api::cel::authz`) decided for the user a write acts as, or for the ServiceAccount that
//! `serviceAccount(namespace, name)` names (with its two ServiceAccount groups only, as
//! upstream builds that user).

use super::attributes::Attributes;
use super::rbac;
use super::tokens::UserInfo;
use crate::admission::webhooks::Requester;
use crate::api::cel::authz::{Check, Verdict};
use crate::storage::store::State;

/// Decides `c` for `user` on the RBAC objects in `state`.
pub fn authorize(state: &State, user: &Requester, c: &Check) -> Verdict {
    let user = match &c.service_account {
        Some((ns, name)) => {
            let mut sa = UserInfo::service_account(ns, name, "");
            sa.groups.retain(|g| g != "system:authenticated");
            sa
        }
        None => UserInfo {
            name: user.username.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
        },
    };
    let attrs = Attributes {
        verb: c.verb.clone(),
        resource_request: c.path.is_none(),
        path: c.path.clone().unwrap_or_default(),
        api_group: c.group.clone(),
        api_version: c.version.clone(),
        namespace: c.namespace.clone(),
        resource: c.resource.clone(),
        subresource: c.subresource.clone(),
        name: c.name.clone(),
    };
    let d = rbac::authorize(state, &user, &attrs);
    Verdict {
        allowed: d.allowed,
        reason: d.reason,
        error: String::new(),
    }
}
