//! The authorization attributes of a request, parsed from its method, path and query the way
//! k8s.io/apiserver's `RequestInfoFactory` does (verb, API group and version, namespace,
//! resource, subresource, name, or a non-resource path), and upstream's Forbidden wording for them.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::api::status::ApiError;

/// What an authorizer decides on: one request, or one SubjectAccessReview's attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// kube-apiserver verb (`get`, `list`, `watch`, `create`, ...) or, for a non-resource
    /// request, the lower-case HTTP method.
    pub verb: String,
    /// Whether this addresses an API resource (`/api/...`, `/apis/...` with a resource).
    pub resource_request: bool,
    /// URL path (non-resource requests are authorized on it).
    pub path: String,
    /// API group, empty for core.
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Namespace, empty for cluster scope.
    pub namespace: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource, e.g. `status` or `token`.
    pub subresource: String,
    /// Object name, when the request names one.
    pub name: String,
}

/// Subresources of a namespace (`/api/v1/namespaces/NAME/status`), as upstream lists them.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

/// Parses a request as upstream's `RequestInfoFactory.NewRequestInfo` does.
pub fn of_request(method: &str, path: &str, query: &HashMap<String, String>) -> Attributes {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let non_resource = Attributes {
        verb: method.to_lowercase(),
        path: path.to_string(),
        ..Attributes::default()
    };
    if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
        return non_resource;
    }
    let mut a = Attributes {
        resource_request: true,
        path: path.to_string(),
        ..Attributes::default()
    };
    let mut rest = &parts[1..];
    if parts[0] == "apis" {
        if rest.len() < 3 {
            return non_resource;
        }
        a.api_group = rest[0].to_string();
        rest = &rest[1..];
    }
    a.api_version = rest[0].to_string();
    rest = &rest[1..];
    if rest[0] == "watch" && rest.len() >= 2 {
        a.verb = "watch".into();
        rest = &rest[1..];
    } else {
        a.verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .into();
    }
    if rest[0] == "namespaces" && rest.len() > 1 {
        a.namespace = rest[1].to_string();
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
            rest = &rest[2..];
        }
    }
    a.resource = rest[0].to_string();
    if let Some(name) = rest.get(1) {
        a.name = (*name).to_string();
    }
    if let Some(sub) = rest.get(2) {
        a.subresource = (*sub).to_string();
    }
    if a.name.is_empty() && a.verb == "get" {
        let watching = query
            .get("watch")
            .is_some_and(|v| matches!(v.as_str(), "1" | "true" | "True" | "TRUE" | "t" | "T"));
        a.verb = if watching { "watch" } else { "list" }.into();
        if let Some(name) = query.get("fieldSelector").and_then(|s| exact_name(s)) {
            a.name = name;
        }
    }
    if a.name.is_empty() && a.verb == "delete" {
        a.verb = "deletecollection".into();
    }
    a
}

/// The name a field selector pins with `metadata.name=X` (or `==`), as upstream's
/// `RequiresExactMatch` finds it.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let value = term
            .trim()
            .strip_prefix("metadata.name")?
            .trim_start()
            .strip_prefix('=')?;
        let value = value.strip_prefix('=').unwrap_or(value).trim();
        (!value.is_empty() && !value.contains('/') && value != "." && value != "..")
            .then(|| value.to_string())
    })
}

/// Upstream's 403 for a refused request: `<resource> "<name>" is forbidden: User "u" cannot
/// <verb> resource "<r>" in API group "<g>" in the namespace "<ns>"[: <reason>]`.
pub fn forbidden(user: &str, a: &Attributes, reason: &str) -> ApiError {
    let mut msg = if !a.resource_request {
        format!("User {} cannot {} path {}", q(user), a.verb, q(&a.path))
    } else {
        let mut resource = a.resource.clone();
        if !a.subresource.is_empty() {
            resource = format!("{resource}/{}", a.subresource);
        }
        let scope = if a.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {}", q(&a.namespace))
        };
        format!(
            "User {} cannot {} resource {} in API group {} {scope}",
            q(user),
            a.verb,
            q(&resource),
            q(&a.api_group)
        )
    };
    if !reason.is_empty() {
        msg = format!("{msg}: {reason}");
    }
    let qualified = match (a.resource.as_str(), a.api_group.as_str()) {
        (r, "") => r.to_string(),
        (r, g) => format!("{r}.{g}"),
    };
    let message = match (qualified.is_empty(), a.name.is_empty()) {
        (true, _) => format!("forbidden: {msg}"),
        (false, true) => format!("{qualified} is forbidden: {msg}"),
        (false, false) => format!("{qualified} {} is forbidden: {msg}", q(&a.name)),
    };
    let mut details = Map::new();
    if !a.name.is_empty() {
        details.insert("name".into(), a.name.clone().into());
    }
    if !a.api_group.is_empty() {
        details.insert("group".into(), a.api_group.clone().into());
    }
    if !a.resource.is_empty() {
        details.insert("kind".into(), a.resource.clone().into());
    }
    ApiError {
        code: 403,
        reason: "Forbidden".into(),
        message,
        details: Some(Value::Object(details)),
        retry_after: None,
    }
}

fn q(s: &str) -> String {
    crate::api::status::go_quote(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(method: &str, path: &str, query: &[(&str, &str)]) -> Attributes {
        let q = query
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        of_request(method, path, &q)
    }

    #[test]
    fn requests_parse_as_upstream() {
        let a = parse("GET", "/api/v1/nodes", &[]);
        assert_eq!((a.verb.as_str(), a.resource.as_str()), ("list", "nodes"));
        let a = parse("GET", "/api/v1/nodes", &[("watch", "true")]);
        assert_eq!(a.verb, "watch");
        let a = parse(
            "GET",
            "/api/v1/namespaces/default/configmaps",
            &[("fieldSelector", "metadata.name=x")],
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("list", "x"));
        assert_eq!(a.namespace, "default");
        let a = parse(
            "POST",
            "/api/v1/namespaces/kube-system/serviceaccounts/cm/token",
            &[],
        );
        assert_eq!(
            (
                a.verb.as_str(),
                a.resource.as_str(),
                a.name.as_str(),
                a.subresource.as_str()
            ),
            ("create", "serviceaccounts", "cm", "token")
        );
        let a = parse("GET", "/api/v1/namespaces/foo", &[]);
        assert_eq!(
            (a.verb.as_str(), a.namespace.as_str(), a.name.as_str()),
            ("get", "foo", "foo")
        );
        let a = parse("PUT", "/api/v1/namespaces/foo/finalize", &[]);
        assert_eq!(
            (a.resource.as_str(), a.subresource.as_str()),
            ("namespaces", "finalize")
        );
        let a = parse(
            "DELETE",
            "/apis/coordination.k8s.io/v1/namespaces/x/leases",
            &[],
        );
        assert_eq!(
            (a.verb.as_str(), a.api_group.as_str()),
            ("deletecollection", "coordination.k8s.io")
        );
        for p in [
            "/metrics",
            "/apis",
            "/apis/rbac.authorization.k8s.io/v1",
            "/api/v1",
            "/healthz",
        ] {
            let a = parse("GET", p, &[]);
            assert!(!a.resource_request, "{p}");
            assert_eq!(a.verb, "get");
        }
    }

    #[test]
    fn forbidden_wording_matches_upstream() {
        let a = parse("GET", "/api/v1/nodes", &[]);
        assert_eq!(
            forbidden("system:anonymous", &a, "").message,
            "nodes is forbidden: User \"system:anonymous\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        );
        let a = parse(
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
            &[],
        );
        assert_eq!(
            forbidden("u", &a, "").message,
            "leases.coordination.k8s.io \"l\" is forbidden: User \"u\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\""
        );
        let a = parse("GET", "/metrics", &[]);
        let e = forbidden("u", &a, "");
        assert_eq!(
            e.message,
            "forbidden: User \"u\" cannot get path \"/metrics\""
        );
        assert_eq!(e.details, Some(serde_json::json!({})));
    }
}
