//! Authentication and authorization as kube-apiserver does them, in its order: the client
//! certificate or bearer token names the user (a bad token is 401, none is `system:anonymous`),
//! impersonation headers may switch it, the authorizer (RBAC plus the always-allowed
//! `system:masters`, when enforcement is on; everything allowed otherwise, as
//! `--authorization-mode=AlwaysAllow`) decides, and only then is the request served: the auth
//! APIs (TokenReview, TokenRequest, the access and rules reviews) here, the rest by the router.

mod aggregation;
mod attributes;
mod bootstrap;
pub mod cel;
mod config;
mod env;
mod escalation;
mod impersonation;
mod rbac;
mod reviews;
mod tls;
mod tokens;

use std::collections::HashMap;

use serde_json::Value;

pub use bootstrap::{publish_client_ca, seed};
pub use config::Auth;
pub use reviews::mint;
pub use tls::{ClientCertUser, Tls, base64};
pub use tokens::{API_AUDIENCE, Tokens, UserInfo, random_token};

use crate::api::status::ApiError;
use crate::storage::store::Store;

/// Whom a request acts as: who sent it ([`authenticate`]), or the user it impersonates if the
/// sender may (upstream's 401 or 403 otherwise).
pub fn identify(
    store: &Store,
    auth: &Auth,
    cert: Option<&ClientCertUser>,
    headers: &http::HeaderMap,
) -> Result<UserInfo, ApiError> {
    let authorization = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let requester = authenticate(store, auth, cert, authorization)?;
    impersonation::act_as(store, auth, requester, headers)
}

/// Who sent a request: the user of its verified client certificate (checked first, as
/// upstream's x509 authenticator), else of its `Authorization` bearer token, anonymous without
/// one, or upstream's 401 for a bearer token that does not authenticate.
fn authenticate(
    store: &Store,
    auth: &Auth,
    cert: Option<&ClientCertUser>,
    authorization: Option<&str>,
) -> Result<UserInfo, ApiError> {
    if let Some(ClientCertUser(user)) = cert {
        return Ok(user.clone());
    }
    let token = authorization.and_then(|h| {
        let mut parts = h.split(' ');
        let scheme = parts.next()?;
        let token = parts.next()?;
        (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
    });
    let Some(token) = token else {
        return Ok(UserInfo::anonymous());
    };
    let audiences = [API_AUDIENCE.to_string()];
    auth.tokens
        .authenticate(store, token, &audiences)
        .map(|ok| ok.user)
        .ok_or_else(unauthorized)
}

fn unauthorized() -> ApiError {
    ApiError {
        code: 401,
        reason: "Unauthorized".into(),
        message: "Unauthorized".into(),
        details: None,
        retry_after: None,
    }
}

/// Refuses an unauthenticated or unauthorized request with upstream's Status, answers the auth
/// APIs (`Some`), or lets the router serve it (`None`).
pub fn admit(
    store: &Store,
    auth: &Auth,
    user: &Result<UserInfo, ApiError>,
    (method, path): (&str, &str),
    query: &HashMap<String, String>,
    content_type: &str,
    body: &[u8],
) -> Result<Option<(u16, Value)>, ApiError> {
    let user = user.as_ref().map_err(Clone::clone)?;
    let attrs = attributes::of_request(method, path, query);
    if auth.enforce {
        let decision = store.with(|s| rbac::authorize(s, user, &attrs));
        if !decision.allowed {
            return Err(attributes::forbidden(&user.name, &attrs, &decision.reason));
        }
        store.with(|s| escalation::check(s, user, &attrs, content_type, body))?;
    }
    reviews::serve(store, auth, user, &attrs, content_type, body).transpose()
}

/// After a request was served: a successful ClusterRole write re-aggregates the ClusterRoles
/// with an `aggregationRule`, as upstream's aggregation controller would shortly after.
pub fn served(store: &Store, method: &str, path: &str, status: u16) {
    let write = !matches!(method, "GET" | "HEAD");
    let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let role_path = path
        .strip_prefix(roles)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
    if write && (200..300).contains(&status) && role_path {
        store.with(aggregation::aggregate);
    }
}
