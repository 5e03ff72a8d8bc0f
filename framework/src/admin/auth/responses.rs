//! The refusals k8s.io/apiserver's filters send, byte for byte: 401 `Unauthorized` and 403
//! `Forbidden` as `Status` objects (indented for curl, Wget and browsers, as upstream's
//! negotiation does), and the plain-text 500 when an authorization check could not be made.

use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::admin::text::text;

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: Empty,
    status: &'static str,
    message: &'a str,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Empty>,
    code: u16,
}

/// Upstream's `isPrettyPrint`: `?pretty=<bool>` wins, else the user agent decides.
fn pretty(uri: &Uri, headers: &HeaderMap) -> bool {
    if let Some(query) = uri.query() {
        for pair in query.split('&') {
            if let Some(v) = pair.strip_prefix("pretty=").filter(|v| !v.is_empty()) {
                return matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True");
            }
        }
    }
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    ["curl", "Wget", "Mozilla/5.0"]
        .iter()
        .any(|p| agent.starts_with(p))
}

fn status(uri: &Uri, headers: &HeaderMap, code: StatusCode, s: &Status<'_>) -> Response {
    let body = match pretty(uri, headers) {
        true => serde_json::to_string_pretty(s),
        false => serde_json::to_string(s).map(|b| b + "\n"),
    }
    .unwrap_or_default();
    let mut response = (code, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// 401, as `genericapifilters.Unauthorized`.
pub(crate) fn unauthorized(uri: &Uri, headers: &HeaderMap) -> Response {
    let s = Status {
        kind: "Status",
        api_version: "v1",
        metadata: Empty {},
        status: "Failure",
        message: "Unauthorized",
        reason: "Unauthorized",
        details: None,
        code: 401,
    };
    status(uri, headers, StatusCode::UNAUTHORIZED, &s)
}

/// 403 for a non-resource request, as `responsewriters.Forbidden`.
pub(crate) fn forbidden(
    uri: &Uri,
    headers: &HeaderMap,
    user: &str,
    verb: &str,
    reason: &str,
) -> Response {
    let mut message = format!(
        "forbidden: User {user:?} cannot {verb} path {:?}",
        uri.path()
    );
    if !reason.is_empty() {
        message = format!("{message}: {reason}");
    }
    let s = Status {
        kind: "Status",
        api_version: "v1",
        metadata: Empty {},
        status: "Failure",
        message: &message,
        reason: "Forbidden",
        details: Some(Empty {}),
        code: 403,
    };
    status(uri, headers, StatusCode::FORBIDDEN, &s)
}

/// 500 when the SubjectAccessReview failed, as `responsewriters.InternalError`.
pub(crate) fn internal_error(uri: &Uri, error: &str) -> Response {
    let request_uri = uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or(uri.path());
    text(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("Internal Server Error: {request_uri:?}: {error}\n"),
    )
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    async fn body(r: Response) -> String {
        let bytes = r.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn bodies_match_kube_apiserver() {
        let uri: Uri = "/metrics".parse().unwrap();
        let mut curl = HeaderMap::new();
        curl.insert(header::USER_AGENT, HeaderValue::from_static("curl/8.5.0"));
        // shared/upstream/apiserver-responses/bad-token-unauthorized.txt
        assert_eq!(
            body(unauthorized(&uri, &curl)).await,
            "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \"message\": \"Unauthorized\",\n  \"reason\": \"Unauthorized\",\n  \"code\": 401\n}"
        );
        let r = forbidden(&uri, &HeaderMap::new(), "system:anonymous", "get", "");
        assert_eq!(r.status(), 403);
        assert_eq!(
            body(r).await,
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"forbidden: User \\\"system:anonymous\\\" cannot get path \\\"/metrics\\\"\",\"reason\":\"Forbidden\",\"details\":{},\"code\":403}\n"
        );
        let pretty_off: Uri = "/metrics?pretty=false".parse().unwrap();
        assert!(!pretty(&pretty_off, &curl));
        let r = forbidden(
            &uri,
            &HeaderMap::new(),
            "bob",
            "get",
            "no RBAC policy matched",
        );
        assert!(
            body(r)
                .await
                .contains("cannot get path \\\"/metrics\\\": no RBAC policy matched")
        );
        let r = internal_error(&"/metrics?x=1".parse().unwrap(), "boom");
        assert_eq!(
            body(r).await,
            "Internal Server Error: \"/metrics?x=1\": boom\n"
        );
    }
}
