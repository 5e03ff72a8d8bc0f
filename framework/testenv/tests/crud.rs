//! Create / get / list / update / delete through a real kube::Client, with the Status errors and
//! the objects a fresh cluster has.

mod support;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::json;
use support::{api_err, cluster_with};

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"role": "worker"}}}))
        .unwrap()
}

#[tokio::test]
async fn fresh_cluster_has_system_namespaces_and_kubernetes_service() {
    let env = TestEnv::start().await.unwrap();
    let nss: Api<Namespace> = Api::all(env.client());
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
    let svc: Api<Service> = Api::default_namespaced(env.client());
    let k = svc.get("kubernetes").await.unwrap();
    assert_eq!(k.spec.unwrap().cluster_ip.as_deref(), Some("10.96.0.1"));
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::default_namespaced(env.client());
    let slice = slices.get("kubernetes").await.unwrap();
    assert_eq!(
        slice.ports.unwrap()[0].port,
        Some(i32::from(env.addr().port()))
    );
}

#[tokio::test]
async fn node_create_get_update_delete_with_global_resource_version() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    let created = nodes
        .create(&PostParams::default(), &node("n1"))
        .await
        .unwrap();
    let rv1: u64 = created
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    let taints = created.spec.clone().unwrap().taints.unwrap();
    assert_eq!(taints.len(), 1);
    assert_eq!(
        (taints[0].key.as_str(), taints[0].effect.as_str()),
        ("node.kubernetes.io/not-ready", "NoSchedule")
    );

    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"a": "1"}})).unwrap();
    let cm = cms.create(&PostParams::default(), &cm).await.unwrap();
    let rv2: u64 = cm.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv2 > rv1, "one resourceVersion counter across types");

    let mut got = nodes.get("n1").await.unwrap();
    assert_eq!(got, created);
    got.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("zone".into(), "a".into());
    let updated = nodes
        .replace("n1", &PostParams::default(), &got)
        .await
        .unwrap();
    assert_eq!(updated.metadata.labels.unwrap()["zone"], "a");

    // A replace with the old resourceVersion conflicts.
    let err = api_err(
        nodes
            .replace("n1", &PostParams::default(), &got)
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        err.message,
        "Operation cannot be fulfilled on nodes \"n1\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // No-op update keeps the resourceVersion.
    let current = nodes.get("n1").await.unwrap();
    let same = nodes
        .replace("n1", &PostParams::default(), &current)
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version,
        current.metadata.resource_version
    );

    let deleted = nodes.delete("n1", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_right(), "immediate delete returns a Status");
    let err = api_err(nodes.get("n1").await.unwrap_err());
    assert_eq!(
        (err.code, err.reason.as_str(), err.message.as_str()),
        (404, "NotFound", "nodes \"n1\" not found")
    );
}

#[tokio::test]
async fn create_errors_match_upstream_statuses() {
    let (env, nodes) = cluster_with(node("golden-n1")).await;
    let err = api_err(
        nodes
            .create(&PostParams::default(), &node("golden-n1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.reason.as_str(), err.message.as_str()),
        (409, "AlreadyExists", "nodes \"golden-n1\" already exists")
    );

    let err = api_err(
        nodes
            .create(&PostParams::default(), &node("Bad_Name"))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert!(err.message.starts_with("Node \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"), "{}", err.message);

    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "nope");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    let err = api_err(cms.create(&PostParams::default(), &cm).await.unwrap_err());
    assert_eq!(
        (err.code, err.reason.as_str(), err.message.as_str()),
        (404, "NotFound", "namespaces \"nope\" not found")
    );
}

#[tokio::test]
async fn raw_status_bodies_match_captured_responses() {
    let env = TestEnv::start().await.unwrap();
    let http = reqwest_like_get(&env, "/api/v1/nodes/nope").await;
    assert_eq!(http.0, 404);
    assert_eq!(
        http.1,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "nodes \"nope\" not found", "reason": "NotFound",
            "details": {"name": "nope", "kind": "nodes"}, "code": 404
        })
    );
    let bad = reqwest_like_get(&env, "/api/v1/nodes?fieldSelector=spec.bogus%3Dx").await;
    assert_eq!(
        bad,
        (
            400,
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "field label not supported: spec.bogus", "reason": "BadRequest", "code": 400
            })
        )
    );
}

/// GET through kube's raw request API, returning status and JSON body.
async fn reqwest_like_get(env: &TestEnv, path: &str) -> (u16, serde_json::Value) {
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    let resp = env
        .client()
        .send(req.map(kube::client::Body::from))
        .await
        .unwrap();
    let status = resp.status().as_u16();
    use http_body_util::BodyExt;
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn generate_name_and_leases() {
    let env = TestEnv::start().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(env.client(), "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"generateName": "ccm-"},
        "spec": {"holderIdentity": "a_1", "leaseDurationSeconds": 15, "leaseTransitions": 0}
    }))
    .unwrap();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let name = created.metadata.name.clone().unwrap();
    assert!(name.starts_with("ccm-") && name.len() == 9, "{name}");
    assert_eq!(created.metadata.namespace.as_deref(), Some("kube-system"));
    let mut l = created.clone();
    l.spec.as_mut().unwrap().holder_identity = Some("b_2".into());
    let replaced = leases
        .replace(&name, &PostParams::default(), &l)
        .await
        .unwrap();
    assert_eq!(
        replaced.spec.unwrap().holder_identity.as_deref(),
        Some("b_2")
    );
    // The stale one loses.
    let err = api_err(
        leases
            .replace(&name, &PostParams::default(), &l)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
}

#[tokio::test]
async fn shutdown_stops_serving() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let addr = env.addr();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.list(&ListParams::default()).await.unwrap();
    env.shutdown().await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "listener closed"
    );
    assert!(nodes.list(&ListParams::default()).await.is_err());
}

#[tokio::test]
async fn kube_discovery_and_server_version() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "33")
    );
    let discovery = kube::Discovery::new(client).run().await.unwrap();
    let gvk = kube::api::GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease");
    let (resource, caps) = discovery.resolve_gvk(&gvk).expect("leases discovered");
    assert_eq!(resource.plural, "leases");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    let node = kube::api::GroupVersionKind::gvk("", "v1", "Node");
    let (_, caps) = discovery.resolve_gvk(&node).expect("nodes discovered");
    assert_eq!(caps.scope, kube::discovery::Scope::Cluster);
    assert!(
        caps.subresources
            .iter()
            .any(|(r, _)| r.plural == "nodes/status" || r.plural == "status"),
        "{:?}",
        caps.subresources
            .iter()
            .map(|(r, _)| &r.plural)
            .collect::<Vec<_>>()
    );
}

/// `metadata.generation` only where upstream's strategy keeps it: EndpointSlices (any change
/// outside metadata) and Pods (spec changes), not Nodes or ConfigMaps.
#[tokio::test]
async fn generation_follows_upstream_strategies() {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::{Patch, PatchParams};
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let pp = PatchParams::default();
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "s"}, "addressType": "IPv4", "endpoints": []
    }))
    .unwrap();
    let s = slices.create(&PostParams::default(), &slice).await.unwrap();
    assert_eq!(s.metadata.generation, Some(1));
    let add = json!({"endpoints": [{"addresses": ["10.0.0.1"]}]});
    let s = slices.patch("s", &pp, &Patch::Merge(add)).await.unwrap();
    assert_eq!(s.metadata.generation, Some(2));
    let label = json!({"metadata": {"labels": {"a": "b"}}});
    let s = slices.patch("s", &pp, &Patch::Merge(label)).await.unwrap();
    assert_eq!(s.metadata.generation, Some(2));

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .unwrap();
    assert_eq!(
        pods.create(&PostParams::default(), &pod)
            .await
            .unwrap()
            .metadata
            .generation,
        Some(1)
    );
    let status = json!({"status": {"phase": "Running"}});
    let p = pods
        .patch_status("p", &pp, &Patch::Merge(status))
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(1));

    let nodes: Api<Node> = Api::all(client);
    nodes
        .create(&PostParams::default(), &node("n"))
        .await
        .unwrap();
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let n = nodes
        .patch_status("n", &pp, &Patch::Merge(status))
        .await
        .unwrap();
    assert_eq!(n.metadata.generation, None);
}
