//! Authentication and authorization as kube-apiserver does them, in its order: the bearer token
//! names the user (a bad one is 401, none is `system:anonymous`), the authorizer (RBAC plus the
//! always-allowed `system:masters`, when enforcement is on; everything allowed otherwise, as
//! `--authorization-mode=AlwaysAllow`) decides, and only then is the request served, the auth
//! APIs (TokenReview, TokenRequest, the access reviews) here and the rest by the router.

mod attributes;
mod bootstrap;
mod rbac;
mod reviews;
mod tokens;

use std::collections::HashMap;

use serde_json::Value;

pub use bootstrap::seed;
pub use reviews::mint;
pub use tokens::{API_AUDIENCE, Tokens, UserInfo, random_token};

use crate::Shared;
use crate::status::ApiError;

/// The server's authentication and authorization configuration.
#[derive(Debug)]
pub struct Auth {
    /// Every token the server accepts.
    pub tokens: Tokens,
    /// Whether requests are authorized by RBAC (off: every request is allowed).
    pub enforce: bool,
}

/// Who sent a request with this `Authorization` header: the token's user, anonymous without
/// a bearer token, or upstream's 401 for a bearer token that does not authenticate.
pub fn authenticate(shared: &Shared, authorization: Option<&str>) -> Result<UserInfo, ApiError> {
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
    shared
        .store
        .with(|s| shared.auth.tokens.authenticate(s, token, &audiences))
        .map(|ok| ok.user)
        .ok_or_else(unauthorized)
}

fn unauthorized() -> ApiError {
    ApiError {
        code: 401,
        reason: "Unauthorized",
        message: "Unauthorized".into(),
        details: None,
        retry_after: None,
    }
}

/// Refuses an unauthenticated or unauthorized request with upstream's Status, answers the auth
/// APIs (`Some`), or lets the router serve it (`None`).
pub fn admit(
    shared: &Shared,
    user: &Result<UserInfo, ApiError>,
    (method, path): (&str, &str),
    query: &HashMap<String, String>,
    content_type: &str,
    body: &[u8],
) -> Result<Option<(u16, Value)>, ApiError> {
    let user = user.as_ref().map_err(Clone::clone)?;
    let attrs = attributes::of_request(method, path, query);
    if shared.auth.enforce {
        let decision = shared.store.with(|s| rbac::authorize(s, user, &attrs));
        if !decision.allowed {
            return Err(attributes::forbidden(&user.name, &attrs, &decision.reason));
        }
    }
    reviews::serve(shared, user, &attrs, content_type, body).transpose()
}

/// Discovery verbs of the create-only auth APIs (`None`: the type is stored, with every verb).
pub fn discovery_verbs(group: &str, plural: &str) -> Option<&'static [&'static str]> {
    let create_only = matches!(
        (group, plural),
        ("authentication.k8s.io", "tokenreviews") | ("authorization.k8s.io", _)
    );
    create_only.then_some(&["create"][..])
}

/// Discovery entries of the auth subresources of a type (`serviceaccounts/token`).
pub fn discovery_subresources(group: &str, plural: &str) -> Option<Value> {
    ((group, plural) == ("", "serviceaccounts")).then(|| {
        serde_json::json!({
            "name": "serviceaccounts/token", "singularName": "", "namespaced": true,
            "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]
        })
    })
}
