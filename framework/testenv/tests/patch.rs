//! Patches (merge, JSON, strategic), the status subresource split, and finalizers
//! holding a deleted object, all through kube::Client.

mod support;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::{Value, json};
use support::{api_err, cluster_with};

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"role": "worker"}}}))
        .unwrap()
}

/// kube's JSON patch support is behind a feature this workspace does not enable: send it raw.
async fn json_patch(env: &TestEnv, path: &str, ops: &Value) -> (u16, Value) {
    use http_body_util::BodyExt;
    let req = http::Request::patch(path)
        .header("content-type", "application/json-patch+json")
        .body(kube::client::Body::from(serde_json::to_vec(ops).unwrap()))
        .unwrap();
    let resp = env.client().send(req).await.unwrap();
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&body).unwrap())
}

async fn setup() -> (TestEnv, Api<Node>) {
    cluster_with(node("n")).await
}

/// Patches Node `n` on the main endpoint.
async fn patch_n(nodes: &Api<Node>, patch: Patch<Value>) -> kube::Result<Node> {
    nodes.patch("n", &PatchParams::default(), &patch).await
}

#[tokio::test]
async fn strategic_patch_replaces_taints_and_merges_conditions_by_type() {
    let (_env, nodes) = setup().await;
    let pp = PatchParams::default();
    let patched = patch_n(&nodes, Patch::Strategic(json!({"spec": {"providerID": "fake://n", "taints": [{"key": "a", "value": "b", "effect": "NoSchedule"}]}})))
        .await
        .unwrap();
    let spec = serde_json::to_value(patched.spec.unwrap()).unwrap();
    assert_eq!(
        spec,
        json!({"providerID": "fake://n", "taints": [{"key": "a", "value": "b", "effect": "NoSchedule"}]})
    );

    let cond = |t: &str, s: &str| json!({"type": t, "status": s, "reason": "r", "message": "m"});
    nodes.patch_status("n", &pp, &Patch::Strategic(json!({"status": {"conditions": [cond("Ready", "False"), cond("DiskPressure", "False")]}}))).await.unwrap();
    let n = nodes
        .patch_status(
            "n",
            &pp,
            &Patch::Strategic(json!({"status": {"conditions": [cond("Ready", "True")]}})),
        )
        .await
        .unwrap();
    let conds: Vec<(String, String)> = n
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        conds,
        [
            ("Ready".to_string(), "True".to_string()),
            ("DiskPressure".into(), "False".into())
        ]
    );
}

#[tokio::test]
async fn merge_and_json_patches_and_their_errors() {
    let (env, nodes) = setup().await;
    let pp = PatchParams::default();
    let n = patch_n(
        &nodes,
        Patch::Merge(json!({"metadata": {"labels": {"role": null, "zone": "a"}}})),
    )
    .await
    .unwrap();
    assert_eq!(
        serde_json::to_value(n.metadata.labels).unwrap(),
        json!({"zone": "a"})
    );

    let ops = json!([
        {"op": "test", "path": "/metadata/labels/zone", "value": "a"},
        {"op": "add", "path": "/spec/unschedulable", "value": true}
    ]);
    let (code, n) = json_patch(&env, "/api/v1/nodes/n", &ops).await;
    assert_eq!((code, &n["spec"]["unschedulable"]), (200, &json!(true)));

    let failing = json!([{"op": "test", "path": "/metadata/labels/zone", "value": "b"}]);
    let (code, status) = json_patch(&env, "/api/v1/nodes/n", &failing).await;
    assert_eq!((code, &status["reason"]), (422, &json!("Invalid")));
    assert_eq!(
        nodes.get("n").await.unwrap().spec.unwrap().unschedulable,
        Some(true)
    );

    // A patch carrying a stale resourceVersion conflicts, like an update.
    let err = api_err(
        patch_n(
            &nodes,
            Patch::Merge(
                json!({"metadata": {"resourceVersion": "1"}, "spec": {"unschedulable": false}}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));

    let err = api_err(
        nodes
            .patch("missing", &pp, &Patch::Merge(json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 404);
}

#[tokio::test]
async fn status_subresource_split() {
    let (_env, nodes) = setup().await;
    let pp = PatchParams::default();
    // The main endpoint ignores status.
    let n = patch_n(
        &nodes,
        Patch::Merge(json!({"spec": {"podCIDR": "10.0.0.0/24"}, "status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    assert_eq!(n.spec.unwrap().pod_cidr.as_deref(), Some("10.0.0.0/24"));
    assert_eq!(n.status.unwrap().phase, None);
    // /status ignores spec but keeps metadata changes.
    let n = nodes.patch_status("n", &pp, &Patch::Merge(json!({"metadata": {"labels": {"s": "1"}}, "spec": {"podCIDR": "10.9.0.0/24"}, "status": {"phase": "Running"}}))).await.unwrap();
    assert_eq!(n.spec.unwrap().pod_cidr.as_deref(), Some("10.0.0.0/24"));
    assert_eq!(n.status.unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(n.metadata.labels.unwrap()["s"], "1");
}

#[tokio::test]
async fn finalizers_hold_a_deleted_service_until_removed() {
    let env = TestEnv::start().await.unwrap();
    let svcs: Api<Service> = Api::default_namespaced(env.client());
    let svc: Service = serde_json::from_value(json!({"metadata": {"name": "golden-lb"}, "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})).unwrap();
    svcs.create(&PostParams::default(), &svc).await.unwrap();
    let pp = PatchParams::default();
    svcs.patch_status(
        "golden-lb",
        &pp,
        &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}})),
    )
    .await
    .unwrap();
    let s = svcs.patch_status("golden-lb", &pp, &Patch::Merge(json!({"metadata": {"finalizers": ["service.kubernetes.io/load-balancer-cleanup"]}}))).await.unwrap();
    assert_eq!(
        s.metadata.finalizers.unwrap(),
        ["service.kubernetes.io/load-balancer-cleanup"]
    );

    let deleted = svcs
        .delete("golden-lb", &DeleteParams::default())
        .await
        .unwrap();
    let held = deleted
        .left()
        .expect("a finalized object is returned, not a Status");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(held.metadata.deletion_grace_period_seconds, Some(0));
    let terminating = svcs.get("golden-lb").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());

    // No new finalizers on a terminating object.
    let err = api_err(svcs.patch("golden-lb", &pp, &Patch::Merge(json!({"metadata": {"finalizers": ["service.kubernetes.io/load-balancer-cleanup", "x/y"]}}))).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));

    svcs.patch_status(
        "golden-lb",
        &pp,
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let err = api_err(svcs.get("golden-lb").await.unwrap_err());
    assert_eq!(
        (err.code, err.message.as_str()),
        (404, "services \"golden-lb\" not found")
    );
}

#[tokio::test]
async fn delete_preconditions() {
    let (_env, nodes) = setup().await;
    let err = api_err(
        nodes
            .delete(
                "n",
                &DeleteParams {
                    preconditions: Some(kube::api::Preconditions {
                        uid: Some("wrong".into()),
                        resource_version: None,
                    }),
                    ..Default::default()
                },
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
    assert!(
        err.message
            .contains("Precondition failed: UID in precondition: wrong"),
        "{}",
        err.message
    );
    let current = nodes.get("n").await.unwrap();
    let ok = nodes
        .delete(
            "n",
            &DeleteParams {
                preconditions: Some(kube::api::Preconditions {
                    uid: current.metadata.uid.clone(),
                    resource_version: current.metadata.resource_version.clone(),
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let status: Value = serde_json::to_value(ok.right().unwrap()).unwrap();
    assert_eq!(status["status"], "Success");
    assert_eq!(
        status["details"]["uid"],
        json!(current.metadata.uid.unwrap())
    );
}

#[tokio::test]
async fn node_provider_id_and_pod_cidrs_only_go_from_unset_to_set() {
    let (_env, nodes) = setup().await;
    let n = patch_n(
        &nodes,
        Patch::Merge(json!({"spec": {"providerID": "fake://n", "podCIDR": "10.244.1.0/24"}})),
    )
    .await
    .unwrap();
    let spec = n.spec.unwrap();
    assert_eq!(
        spec.pod_cidrs.unwrap(),
        ["10.244.1.0/24"],
        "podCIDR is mirrored into podCIDRs"
    );
    let err = api_err(
        patch_n(
            &nodes,
            Patch::Merge(json!({"spec": {"providerID": "fake://other"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            422,
            "Node \"n\" is invalid: spec.providerID: Forbidden: node updates may not change providerID except from \"\" to valid"
        )
    );
    let err = api_err(
        patch_n(
            &nodes,
            Patch::Merge(json!({"spec": {"podCIDRs": ["10.244.2.0/24"]}})),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        err.message
            .contains("spec.podCIDRs: Forbidden: node updates may not change podCIDR"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn invalid_taints_and_labels_are_rejected() {
    let (_env, nodes) = setup().await;
    let err = api_err(
        patch_n(
            &nodes,
            Patch::Strategic(json!({"spec": {"taints": [{"key": "a", "effect": "Sometimes"}]}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert_eq!(
        err.message,
        "Node \"n\" is invalid: spec.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoExecute\", \"NoSchedule\", \"PreferNoSchedule\""
    );
    let err = api_err(
        patch_n(
            &nodes,
            Patch::Merge(json!({"metadata": {"labels": {"zone": "us east"}}})),
        )
        .await
        .unwrap_err(),
    );
    assert!(err.message.starts_with("Node \"n\" is invalid: metadata.labels: Invalid value: \"us east\": a valid label must be"), "{}", err.message);
}
