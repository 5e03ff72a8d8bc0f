//! Server-side apply and managedFields through kube::Client (`Patch::Apply`), as kube-rs
//! controllers write: create by apply, ownership per manager, conflicts and force, fields an
//! applier stops sending, map-lists merged by key, `/status` applies, and resetting
//! managedFields with `[{}]`.

mod support;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use kube::{Resource, ResourceExt};
use kube_testenv::TestEnv;
use serde_json::{Value, json};
use support::api_err;

/// `(manager, operation, subresource)` of each managedFields entry.
fn managers<K: Resource>(obj: &K) -> Vec<(String, String, String)> {
    obj.meta()
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
                m.subresource.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// The fieldsV1 of `manager`'s entry.
fn fields_of<K: Resource>(obj: &K, manager: &str) -> Value {
    let entry = obj
        .meta()
        .managed_fields
        .iter()
        .flatten()
        .find(|m| m.manager.as_deref() == Some(manager))
        .unwrap_or_else(|| panic!("no entry for {manager}"));
    serde_json::to_value(&entry.fields_v1.as_ref().unwrap().0).unwrap()
}

fn apply(manager: &str) -> PatchParams {
    PatchParams::apply(manager)
}

#[tokio::test]
async fn nodes_apply_create_update_conflict_force_and_drop() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    let config = |labels: Value| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": labels}});
    let apply_labels = |pp: PatchParams, labels: Value| {
        let nodes = nodes.clone();
        async move { nodes.patch("n1", &pp, &Patch::Apply(config(labels))).await }
    };

    // Apply creates, and the applier owns exactly what it sent.
    let n = apply_labels(apply("alice"), json!({"a": "1", "b": "1"}))
        .await
        .unwrap();
    assert_eq!(managers(&n), [("alice".into(), "Apply".into(), "".into())]);
    assert_eq!(
        fields_of(&n, "alice"),
        json!({"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}}})
    );
    assert_eq!(env.requests().last().unwrap().status, 201);

    // Another applier changing alice's field conflicts, naming field and manager.
    let err = api_err(
        apply_labels(apply("bob"), json!({"a": "2"}))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .metadata.labels.a"
    );
    // Applying the same value is shared ownership, not a conflict.
    apply_labels(apply("bob"), json!({"b": "1"})).await.unwrap();

    // Forced, bob takes the field over.
    let n = apply_labels(apply("bob").force(), json!({"a": "2", "b": "1"}))
        .await
        .unwrap();
    assert_eq!(n.labels()["a"], "2");
    assert_eq!(
        fields_of(&n, "alice"),
        json!({"f:metadata": {"f:labels": {"f:b": {}}}})
    );

    // alice stops sending b: bob still owns it, so it stays; then bob stops too and it goes.
    let n = apply_labels(apply("alice"), json!({"c": "3"}))
        .await
        .unwrap();
    assert_eq!(n.labels().get("b").map(String::as_str), Some("1"));
    let n = apply_labels(apply("bob"), json!({"a": "2"})).await.unwrap();
    assert!(!n.labels().contains_key("b"), "{:?}", n.labels());
    assert_eq!(n.labels()["c"], "3");

    // A re-apply of the same configuration changes nothing, resourceVersion included.
    let again = apply_labels(apply("bob"), json!({"a": "2"})).await.unwrap();
    assert_eq!(again.resource_version(), n.resource_version());
}

#[tokio::test]
async fn ordinary_writes_record_update_entries_and_lose_changed_fields() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    nodes
        .patch(
            "n1",
            &apply("alice"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"a": "1"}}})),
        )
        .await
        .unwrap();
    // A merge patch under another manager changes alice's label: the change is carol's now.
    let pp = PatchParams {
        field_manager: Some("carol".into()),
        ..Default::default()
    };
    let n = nodes
        .patch(
            "n1",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"a": "9", "z": "1"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        managers(&n),
        [("carol".into(), "Update".into(), "".into())],
        "alice owned only the label carol changed, so her entry is gone"
    );
    assert_eq!(
        fields_of(&n, "carol"),
        json!({"f:metadata": {"f:labels": {"f:a": {}, "f:z": {}}}})
    );

    // A write with no fieldManager is recorded under its user agent's first segment.
    let created = Node {
        metadata: ObjectMeta {
            name: Some("n2".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let n2 = nodes
        .create(&PostParams::default(), &created)
        .await
        .unwrap();
    let ua = env
        .requests()
        .last()
        .unwrap()
        .user_agent
        .clone()
        .unwrap_or_default();
    let expected = ua.split('/').next().unwrap_or_default().to_string();
    assert!(
        n2.meta().managed_fields.is_none()
            || managers(&n2)
                .iter()
                .all(|(m, op, _)| *m == expected && op == "Update"),
        "{:?} (user agent {ua:?})",
        managers(&n2)
    );

    // `managedFields: [{}]` resets ownership.
    let n = nodes
        .patch(
            "n1",
            &pp,
            &Patch::Merge(json!({"metadata": {"managedFields": [{}]}})),
        )
        .await
        .unwrap();
    assert!(n.meta().managed_fields.is_none(), "{:?}", managers(&n));
}

#[tokio::test]
async fn services_ports_merge_by_port_and_protocol_and_status_applies_apart() {
    let env = TestEnv::start().await.unwrap();
    let svcs: Api<Service> = Api::namespaced(env.client(), "default");
    let port = |p: u16, name: &str| json!({"name": name, "port": p, "targetPort": p});
    let config = |ports: Value| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": ports}})
    };
    let apply_ports = |manager: &str, ports: Value| {
        let (svcs, pp) = (svcs.clone(), apply(manager));
        async move { svcs.patch("web", &pp, &Patch::Apply(config(ports))).await }
    };
    let ports = |s: &Service| -> Vec<i32> {
        let spec = s.spec.as_ref().unwrap();
        spec.ports.iter().flatten().map(|p| p.port).collect()
    };
    let s = apply_ports("team-a", json!([port(80, "http")]))
        .await
        .unwrap();
    assert_eq!(
        fields_of(&s, "team-a")["f:spec"]["f:ports"],
        json!({"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}, "f:targetPort": {}}})
    );
    // Another team adds a port: the list merges by key, each keeps its own item.
    let s = apply_ports("team-b", json!([port(443, "https")]))
        .await
        .unwrap();
    assert_eq!(ports(&s), [80, 443]);
    // team-a drops its port; team-b's stays.
    let s = apply_ports("team-a", json!([])).await.unwrap();
    assert_eq!(ports(&s), [443]);

    // A controller applies status through /status: its entry names the subresource, and the
    // main endpoint's appliers do not own status.
    let status = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}});
    let s = svcs
        .patch_status("web", &apply("service-controller"), &Patch::Apply(status))
        .await
        .unwrap();
    let ingress = s.status.unwrap().load_balancer.unwrap().ingress.unwrap();
    assert_eq!(ingress[0].ip.as_deref(), Some("203.0.113.7"));
    assert!(managers(&svcs.get("web").await.unwrap()).contains(&(
        "service-controller".into(),
        "Apply".into(),
        "status".into()
    )));
}

#[tokio::test]
async fn leases_apply_and_mismatched_configurations_are_refused() {
    let env = TestEnv::start().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(env.client(), "kube-system");
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "lock"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}});
    let l = leases
        .patch("lock", &apply("elector"), &Patch::Apply(lease))
        .await
        .unwrap();
    assert_eq!(l.spec.unwrap().holder_identity.as_deref(), Some("a"));

    // The configuration must name the type of the URL.
    let wrong = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lock"}});
    let err = api_err(
        leases
            .patch("lock", &apply("elector"), &Patch::Apply(wrong))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400, "{err:?}");
    // And the name of the URL.
    let other = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "other"}});
    let err = api_err(
        leases
            .patch("lock", &apply("elector"), &Patch::Apply(other))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        err.message,
        "the name of the object (other) does not match the name on the URL (lock)"
    );
}
