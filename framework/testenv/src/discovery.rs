//! API discovery documents (`/version`, `/api`, `/api/v1`, `/apis`, `/apis/G`, `/apis/G/V`), built
//! from the resource table in the legacy (unaggregated) format; kubectl falls back to these when
//! the server does not answer aggregated discovery.

use serde_json::{Value, json};

use crate::resources::{ResourceType, TABLE};

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

fn groups() -> Vec<&'static str> {
    let mut g: Vec<&str> = TABLE
        .iter()
        .map(|r| r.group)
        .filter(|g| !g.is_empty())
        .collect();
    g.dedup();
    g.sort_unstable();
    g.dedup();
    g
}

fn group_doc(group: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/v1"), "version": "v1"});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

/// `/apis`.
pub fn api_groups() -> Value {
    let groups: Vec<Value> = groups().into_iter().map(group_doc).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/GROUP`, if served.
pub fn api_group(group: &str) -> Option<Value> {
    groups().contains(&group).then(|| {
        let mut g = group_doc(group);
        g["kind"] = "APIGroup".into();
        g["apiVersion"] = "v1".into();
        g
    })
}

fn resource(r: &ResourceType) -> Vec<Value> {
    let verbs: &[&str] = if r.plural == "namespaces" {
        &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ]
    } else {
        &[
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    };
    let verbs = crate::auth::discovery_verbs(r.group, r.plural).unwrap_or(verbs);
    let mut main = json!({
        "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind, "verbs": verbs,
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if r.kind == "Service" || r.kind == "Pod" {
        main["categories"] = json!(["all"]);
    }
    let mut out = vec![main];
    if r.status_subresource {
        out.push(json!({
            "name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced,
            "kind": r.kind, "verbs": ["get", "patch", "update"]
        }));
    }
    out.extend(crate::auth::discovery_subresources(r.group, r.plural));
    out
}

/// `/api/v1` or `/apis/GROUP/VERSION`, if served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = TABLE
        .iter()
        .filter(|r| r.group == group && r.version == version)
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
