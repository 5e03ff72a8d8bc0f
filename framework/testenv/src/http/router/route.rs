//! What a request addresses: the URL parsed into (group, version, namespace, resource, name,
//! subresource) and a kube-apiserver verb, and the query's selectors.

use std::collections::HashMap;

use http::Method;

use crate::api::status::ApiError;
use crate::api::types::Registry;
use crate::handlers::Target;
use crate::http::watch;
use crate::storage::selectors::{FieldSelector, Filter, LabelSelector};

pub(super) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a query string into a map (last value wins).
pub fn parse_query(q: &str) -> HashMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

/// What a request addresses.
#[derive(Debug)]
pub(super) enum Route {
    NonResource(&'static str),
    ApiGroup(String),
    ResourceList(String, String),
    OpenApiRoot,
    OpenApi(String, String),
    /// `/openapi/v2`; true when the client asked for protobuf.
    OpenApiV2(bool),
    Resource {
        target: Target,
        verb: &'static str,
    },
    NotFound,
}

pub(super) fn route(
    method: &Method,
    path: &str,
    query: &HashMap<String, String>,
    types: &Registry,
) -> Route {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::NonResource("version"),
        ["healthz"] | ["livez"] | ["readyz"] => return Route::NonResource("healthz"),
        ["api"] => return Route::NonResource("api"),
        ["apis"] => return Route::NonResource("apis"),
        ["openapi", "v2"] => return Route::OpenApiV2(false),
        ["openapi", "v3"] => return Route::OpenApiRoot,
        ["openapi", "v3", "api", v] => return Route::OpenApi(String::new(), (*v).to_string()),
        ["openapi", "v3", "apis", g, v] => {
            return Route::OpenApi((*g).to_string(), (*v).to_string());
        }
        ["apis", g] => return Route::ApiGroup((*g).to_string()),
        ["api", v] => return Route::ResourceList(String::new(), (*v).to_string()),
        ["apis", g, v] => return Route::ResourceList((*g).to_string(), (*v).to_string()),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Route::NotFound,
    };
    let (ns, plural, name, sub) = match rest {
        ["namespaces", ns, "status" | "finalize"] if group.is_empty() => {
            (None, "namespaces", Some(*ns), rest.get(2).copied())
        }
        ["namespaces", ns, plural] => (Some(*ns), *plural, None, None),
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name), None),
        ["namespaces", ns, plural, name, sub] => (Some(*ns), *plural, Some(*name), Some(*sub)),
        [plural] => (None, *plural, None, None),
        [plural, name] => (None, *plural, Some(*name), None),
        [plural, name, sub] => (None, *plural, Some(*name), Some(*sub)),
        _ => return Route::NotFound,
    };
    let Some(res) = types.lookup(group, version, plural) else {
        return Route::NotFound;
    };
    let Some(rt) = types.get(res) else {
        return Route::NotFound;
    };
    if ns.is_some() && !rt.namespaced() {
        return Route::NotFound;
    }
    match sub {
        None => {}
        Some("status") if rt.status_subresource() => {}
        Some("scale") if rt.scale().is_some() => {}
        // TokenRequest, served by `auth` before dispatch.
        Some("token") if rt.plural() == "serviceaccounts" => {}
        Some(_) => return Route::NotFound,
    }
    let watching = watch::flag(query.get("watch").map(String::as_str));
    let verb = match (method, name.is_some()) {
        (&Method::GET, true) if watching => "watch",
        (&Method::GET, true) => "get",
        (&Method::GET, false) if watching => "watch",
        (&Method::GET, false) => "list",
        (&Method::POST, false) => "create",
        (&Method::POST, true) if sub.is_some() => "create",
        (&Method::PUT, true) => "update",
        (&Method::PATCH, true) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => "unsupported",
    };
    let target = Target {
        res,
        rt,
        ns: ns.map(String::from),
        name: name.map(String::from),
        sub: sub.map(String::from),
    };
    Route::Resource { target, verb }
}

pub(super) fn filter_from(
    query: &HashMap<String, String>,
    target: &Target,
) -> Result<Filter, ApiError> {
    let rt = &target.rt;
    let mut filter = Filter {
        namespace: target.ns.clone().filter(|_| rt.namespaced()),
        labels: LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))?,
        fields: FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str), rt)?,
    };
    if let Some(name) = &target.name {
        // GET .../NAME?watch=true is a watch of that one object.
        filter.fields = FieldSelector::parse(&format!("metadata.name={name}"), rt)?;
    }
    Ok(filter)
}
