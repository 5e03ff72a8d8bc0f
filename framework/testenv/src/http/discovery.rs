//! API discovery documents (`/version`, `/api`, `/api/v1`, `/apis`, `/apis/G`, `/apis/G/V`), built
//! from the served types (the built-in table and the versions established CRDs serve) in the
//! legacy (unaggregated) format; kubectl falls back to these when the server does not answer
//! aggregated discovery.

use std::cmp::Ordering;

use serde_json::{Value, json};

use crate::api::types::{Registry, Served};

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-testenv",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

/// Kubernetes version priority (`v1` > `v1beta2` > `v1beta1` > `v1alpha1` > other, newest first),
/// as upstream orders a group's versions and picks its preferred one.
fn version_order(a: &str, b: &str) -> Ordering {
    fn key(v: &str) -> (u8, u64, u64, String) {
        let parse = || -> Option<(u8, u64, u64)> {
            let rest = v.strip_prefix('v')?;
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let major: u64 = digits.parse().ok()?;
            let tail = &rest[digits.len()..];
            if tail.is_empty() {
                return Some((3, major, 0));
            }
            let (level, n) = if let Some(n) = tail.strip_prefix("beta") {
                (2, n)
            } else {
                (1, tail.strip_prefix("alpha")?)
            };
            Some((level, major, n.parse().ok()?))
        };
        match parse() {
            Some((l, m, n)) => (l, m, n, String::new()),
            None => (0, 0, 0, v.to_string()),
        }
    }
    let (ka, kb) = (key(a), key(b));
    // Higher level/major/minor first; unversioned names alphabetically.
    kb.0.cmp(&ka.0)
        .then(kb.1.cmp(&ka.1))
        .then(kb.2.cmp(&ka.2))
        .then(ka.3.cmp(&kb.3))
}

/// (group, versions in priority order) of every served non-core group, sorted by group.
fn groups(types: &Registry) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (_, t) in types.all() {
        if t.group().is_empty() {
            continue;
        }
        match out.iter_mut().find(|(g, _)| g == t.group()) {
            Some((_, vs)) if !vs.iter().any(|v| v == t.version()) => vs.push(t.version().into()),
            Some(_) => {}
            None => out.push((t.group().into(), vec![t.version().into()])),
        }
    }
    for (_, vs) in &mut out {
        vs.sort_by(|a, b| version_order(a, b));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn group_doc(group: &str, versions: &[String]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    let preferred = gvs.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": gvs, "preferredVersion": preferred})
}

/// `/apis`.
pub fn api_groups(types: &Registry) -> Value {
    let groups: Vec<Value> = groups(types)
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/GROUP`, if served.
pub fn api_group(types: &Registry, group: &str) -> Option<Value> {
    let groups = groups(types);
    let (g, vs) = groups.iter().find(|(g, _)| g == group)?;
    let mut doc = group_doc(g, vs);
    doc["kind"] = "APIGroup".into();
    doc["apiVersion"] = "v1".into();
    Some(doc)
}

/// The order apiextensions-apiserver lists a custom resource's verbs in.
const CUSTOM_VERBS: &[&str] = &[
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

fn resource(r: &Served) -> Vec<Value> {
    let verbs = match r {
        Served::Custom(_) => CUSTOM_VERBS,
        Served::Builtin(k) => k.rest.verbs,
    };
    let mut main = json!({
        "name": r.plural(), "singularName": r.singular(), "namespaced": r.namespaced(), "kind": r.kind(), "verbs": verbs,
    });
    if !r.short_names().is_empty() {
        main["shortNames"] = json!(r.short_names());
    }
    if !r.categories().is_empty() {
        main["categories"] = json!(r.categories());
    }
    if let Served::Custom(c) = r {
        main["storageVersionHash"] = c.storage_hash.clone().into();
    }
    let mut out = vec![main];
    if r.status_subresource() {
        out.push(json!({
            "name": format!("{}/status", r.plural()), "singularName": "", "namespaced": r.namespaced(),
            "kind": r.kind(), "verbs": ["get", "patch", "update"]
        }));
    }
    if r.scale().is_some() {
        out.push(json!({
            "name": format!("{}/scale", r.plural()), "singularName": "", "namespaced": r.namespaced(),
            "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]
        }));
    }
    out.extend(auth_subresources(r.group(), r.plural()));
    out
}

/// `/api/v1` or `/apis/GROUP/VERSION`, if served.
pub fn resource_list(types: &Registry, group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = types
        .all()
        .iter()
        .map(|(_, r)| r)
        .filter(|r| r.group() == group && r.version() == version)
        .flat_map(resource)
        .collect();
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// Discovery entries of the auth subresources of a type (`serviceaccounts/token`).
fn auth_subresources(group: &str, plural: &str) -> Option<Value> {
    ((group, plural) == ("", "serviceaccounts")).then(|| {
        serde_json::json!({
            "name": "serviceaccounts/token", "singularName": "", "namespaced": true,
            "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_by_kubernetes_priority() {
        let mut v = vec!["v1alpha1", "foo", "v1beta1", "v2", "v1", "v1beta2", "bar"];
        v.sort_by(|a, b| version_order(a, b));
        assert_eq!(
            v,
            ["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "bar", "foo"]
        );
    }
}
