//! The server's authorizer as admission's CEL expressions ask it (`authorizer.….check(verb)`):
//! the function the HTTP layer put in the write's [`Requester`] (RBAC, `auth::cel`) on the
//! stored roles, or, when RBAC is off, nothing at all, so everything is allowed as under
//! kube-apiserver's AlwaysAllow.

use kube_cel::cel::Value as Cel;

use super::{Authorize, Request, Requester};
use crate::api::cel::authz::{self, Authorizer, Check, Verdict};
use crate::storage::store::State;

/// The authorizer of one write's expressions.
pub struct Server<'a> {
    state: &'a State,
    user: &'a Requester,
    authorize: Authorize,
}

impl<'a> Server<'a> {
    /// The authorizer of `req`'s expressions: none when RBAC is off.
    pub fn of(state: &'a State, req: &'a Request) -> Option<Server<'a>> {
        req.user.authorize.map(|authorize| Server {
            state,
            user: &req.user,
            authorize,
        })
    }
}

impl Authorizer for Server<'_> {
    fn authorize(&self, c: &Check) -> Verdict {
        (self.authorize)(self.state, self.user, c)
    }
}

/// The `authorizer` variable of `req`'s expressions.
pub fn variable(req: &Request) -> Cel {
    authz::variable(Check {
        group: req.resource.group.clone(),
        version: req.resource.version.clone(),
        resource: req.resource.resource.clone(),
        subresource: req.sub_resource.clone(),
        namespace: req.namespace.clone(),
        name: req.name.clone(),
        ..Check::default()
    })
}
