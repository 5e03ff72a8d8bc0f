//! What an API request does, read from its method and URL the way the API server's
//! `RequestInfoFactory` reads it: the Kubernetes verb (`get`, `list`, `watch`, `create`,
//! `update`, `patch`, `delete`, `deletecollection`) and the resource, namespace, name and
//! subresource. Spans are named by it and the rate limiter exempts watches by it.

use http::{Method, Uri};

/// The Kubernetes view of one HTTP request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Kubernetes verb; for non-resource paths the lower-case HTTP method.
    pub verb: String,
    /// API group; empty for the core group and for non-resource paths.
    pub group: String,
    /// Plural resource name, e.g. `nodes`; `None` for non-resource paths such as `/version`.
    pub resource: Option<String>,
    /// Subresource, e.g. `status`.
    pub subresource: Option<String>,
    /// Namespace for namespaced requests.
    pub namespace: Option<String>,
    /// Object name for single-object requests.
    pub name: Option<String>,
}

impl RequestInfo {
    /// Parses `method` + `uri` (path and query; the authority is ignored).
    pub fn parse(method: &Method, uri: &Uri) -> Self {
        let watch_param = uri.query().is_some_and(|q| {
            q.split('&')
                .any(|kv| kv == "watch=true" || kv == "watch=1" || kv == "watch")
        });
        let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
        let rest = match segments.as_slice() {
            ["api", _version, rest @ ..] => Some(("", rest)),
            ["apis", group, _version, rest @ ..] => Some((*group, rest)),
            _ => None,
        };
        let Some((group, mut parts)) = rest.filter(|(_, rest)| !rest.is_empty()) else {
            return Self {
                verb: method.as_str().to_ascii_lowercase(),
                ..Self::default()
            };
        };
        let mut legacy_watch = false;
        if parts.first() == Some(&"watch") {
            legacy_watch = true;
            parts = &parts[1..];
        }
        let mut namespace = None;
        if parts.first() == Some(&"namespaces") && parts.len() >= 2 {
            namespace = Some(parts[1].to_string());
            // `namespaces/{ns}/status|finalize` are subresources of the Namespace itself.
            if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
                parts = &parts[2..];
            }
        }
        let resource = parts.first().map(|s| s.to_string());
        let mut name = parts.get(1).map(|s| s.to_string());
        let subresource = parts.get(2).map(|s| s.to_string());
        if resource.as_deref() == Some("namespaces") && parts.len() >= 2 {
            // The namespace *is* the object.
            name = namespace.clone();
        }
        let verb = match *method {
            Method::GET | Method::HEAD if legacy_watch || watch_param => "watch",
            Method::GET | Method::HEAD if name.is_some() => "get",
            Method::GET | Method::HEAD => "list",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if name.is_some() => "delete",
            Method::DELETE => "deletecollection",
            _ => {
                return Self {
                    verb: method.as_str().to_ascii_lowercase(),
                    group: group.to_string(),
                    resource,
                    subresource,
                    namespace,
                    name,
                };
            }
        };
        Self {
            verb: verb.to_string(),
            group: group.to_string(),
            resource,
            subresource,
            namespace,
            name,
        }
    }

    /// Long-running requests hold a connection open for minutes; they are not rate limited.
    pub fn is_long_running(&self) -> bool {
        self.verb == "watch"
            || matches!(
                self.subresource.as_deref(),
                Some("exec" | "attach" | "portforward" | "proxy")
            )
    }

    /// `resource` or `resource/subresource`, the span-name form (`services/status`).
    pub fn resource_path(&self) -> Option<String> {
        let resource = self.resource.as_ref()?;
        Some(match &self.subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, uri: &str) -> RequestInfo {
        RequestInfo::parse(&method, &uri.parse().unwrap())
    }

    #[test]
    fn core_cluster_scoped_get_and_list() {
        let i = info(Method::GET, "/api/v1/nodes/n1");
        assert_eq!(
            (i.verb.as_str(), i.resource.as_deref(), i.name.as_deref()),
            ("get", Some("nodes"), Some("n1"))
        );
        assert_eq!(i.namespace, None);
        let i = info(Method::GET, "/api/v1/nodes?limit=500");
        assert_eq!((i.verb.as_str(), i.name), ("list", None));
    }

    #[test]
    fn namespaced_group_resource_with_subresource() {
        let i = info(
            Method::PATCH,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ccm/status?fieldManager=x",
        );
        assert_eq!(i.verb, "patch");
        assert_eq!(i.group, "coordination.k8s.io");
        assert_eq!(i.namespace.as_deref(), Some("kube-system"));
        assert_eq!(i.resource_path().as_deref(), Some("leases/status"));
        assert_eq!(i.name.as_deref(), Some("ccm"));
    }

    #[test]
    fn watches_by_query_and_by_legacy_prefix_are_long_running() {
        let i = info(
            Method::GET,
            "/api/v1/services?watch=true&resourceVersion=10",
        );
        assert_eq!(i.verb, "watch");
        assert!(i.is_long_running());
        let i = info(Method::GET, "/api/v1/watch/namespaces/default/pods");
        assert_eq!(
            (i.verb.as_str(), i.resource.as_deref()),
            ("watch", Some("pods"))
        );
        assert!(!info(Method::GET, "/api/v1/services?watch=false").is_long_running());
    }

    #[test]
    fn write_verbs() {
        assert_eq!(
            info(Method::POST, "/api/v1/namespaces/d/events").verb,
            "create"
        );
        assert_eq!(
            info(Method::PUT, "/api/v1/namespaces/d/services/s/status").verb,
            "update"
        );
        assert_eq!(info(Method::DELETE, "/api/v1/nodes/n1").verb, "delete");
        assert_eq!(
            info(Method::DELETE, "/api/v1/namespaces/d/pods").verb,
            "deletecollection"
        );
    }

    #[test]
    fn namespace_objects_and_their_subresources() {
        let i = info(Method::GET, "/api/v1/namespaces/kube-system");
        assert_eq!(
            (i.resource.as_deref(), i.name.as_deref()),
            (Some("namespaces"), Some("kube-system"))
        );
        let i = info(Method::PUT, "/api/v1/namespaces/x/finalize");
        assert_eq!(i.resource_path().as_deref(), Some("namespaces/finalize"));
        assert_eq!(i.name.as_deref(), Some("x"));
        assert_eq!(info(Method::GET, "/api/v1/namespaces").verb, "list");
    }

    #[test]
    fn non_resource_paths_use_the_method() {
        let i = info(Method::GET, "/version");
        assert_eq!((i.verb.as_str(), i.resource), ("get", None));
        assert_eq!(info(Method::GET, "/apis").resource, None);
    }
}
