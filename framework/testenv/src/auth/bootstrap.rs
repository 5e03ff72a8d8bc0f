//! The RBAC objects kube-apiserver's bootstrap policy creates that controllers and their tests
//! rely on: `cluster-admin` (bound to `system:masters`), the discovery / basic-user /
//! public-info-viewer roles every caller gets, `system:auth-delegator` and the
//! `extension-apiserver-authentication-reader` Role in kube-system, with upstream's rules.

use serde_json::{Value, json};

use crate::api::cluster::AdmissionConfig;
use crate::handlers::{self, Target};
use crate::storage::store::State;

const GROUP: &str = "rbac.authorization.k8s.io";

fn meta(name: &str, namespace: Option<&str>) -> Value {
    let mut m = json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    });
    if let Some(ns) = namespace {
        m["namespace"] = ns.into();
    }
    m
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(name, None), "rules": rules})
}

fn cluster_binding(name: &str, role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(name, None),
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// The bootstrap objects, as (plural, namespace, object).
fn objects() -> Vec<(&'static str, Option<&'static str>, Value)> {
    let public_urls = json!(["/healthz", "/livez", "/readyz", "/version", "/version/"]);
    vec![
        (
            "clusterroles",
            None,
            cluster_role(
                "cluster-admin",
                json!([
                    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                    {"nonResourceURLs": ["*"], "verbs": ["*"]}
                ]),
            ),
        ),
        (
            "clusterroles",
            None,
            cluster_role(
                "system:discovery",
                json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            ),
        ),
        (
            "clusterroles",
            None,
            cluster_role(
                "system:basic-user",
                json!([{"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]}]),
            ),
        ),
        (
            "clusterroles",
            None,
            cluster_role(
                "system:public-info-viewer",
                json!([{"nonResourceURLs": public_urls, "verbs": ["get"]}]),
            ),
        ),
        (
            "clusterroles",
            None,
            cluster_role(
                "system:auth-delegator",
                json!([
                    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}
                ]),
            ),
        ),
        (
            "clusterrolebindings",
            None,
            cluster_binding("cluster-admin", "cluster-admin", &["system:masters"]),
        ),
        (
            "clusterrolebindings",
            None,
            cluster_binding(
                "system:discovery",
                "system:discovery",
                &["system:authenticated"],
            ),
        ),
        (
            "clusterrolebindings",
            None,
            cluster_binding(
                "system:basic-user",
                "system:basic-user",
                &["system:authenticated"],
            ),
        ),
        (
            "clusterrolebindings",
            None,
            cluster_binding(
                "system:public-info-viewer",
                "system:public-info-viewer",
                &["system:authenticated", "system:unauthenticated"],
            ),
        ),
        (
            "roles",
            Some("kube-system"),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": meta("extension-apiserver-authentication-reader", Some("kube-system")),
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["extension-apiserver-authentication"], "verbs": ["get", "list", "watch"]}],
            }),
        ),
    ]
}

/// Creates the bootstrap roles and bindings (after the system namespaces exist).
pub fn seed(state: &mut State, cfg: &AdmissionConfig) {
    for (plural, ns, obj) in objects() {
        let Some(t) = Target::builtin(GROUP, plural, ns) else {
            continue;
        };
        if let Err(e) = handlers::create(
            state,
            cfg,
            &t,
            obj,
            &handlers::WriteOptions::by("kube-apiserver"),
        ) {
            tracing::error!(error = ?e, plural, "seeding the RBAC bootstrap policy");
        }
    }
}

/// Publishes the client CA in `kube-system/extension-apiserver-authentication`, as
/// kube-apiserver's `ClientCARegistrationHook` does when it has a `--client-ca-file`.
pub fn publish_client_ca(state: &mut State, cfg: &AdmissionConfig, ca_pem: &str) {
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
        "data": {"client-ca-file": ca_pem},
    });
    let Some(t) = Target::builtin("", "configmaps", Some("kube-system")) else {
        return;
    };
    if let Err(e) = handlers::create(
        state,
        cfg,
        &t,
        cm,
        &handlers::WriteOptions::by("kube-apiserver"),
    ) {
        tracing::error!(error = ?e, "publishing the client CA");
    }
}
