//! `application/vnd.kubernetes.protobuf` over HTTP: kubectl's generators (which send protobuf),
//! a round trip per served type (GET as protobuf, decoded with k8s-pb, PUT back as protobuf, the
//! JSON answer unchanged), lists, watch frames, negotiation (406, 415, custom resources) and the
//! captured real responses.

mod support;

use http_body_util::BodyExt;
use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbmeta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use kube_testenv::TestEnv;
use prost::Message;
use serde_json::{Value, json};
use support::kubectl::Kubectl;

const PB: &str = "application/vnd.kubernetes.protobuf";

async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, String, Vec<u8>) {
    let mut req = http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = client
        .send(req.body(kube::client::Body::from(body)).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, ct, bytes.to_vec())
}

async fn json(client: &kube::Client, method: &str, path: &str, body: &Value) -> Value {
    let ct = [("content-type", "application/json")];
    let (code, _, b) = send(client, method, path, &ct, serde_json::to_vec(body).unwrap()).await;
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert!(code < 300, "{method} {path}: {code} {v:#}");
    v
}

/// The `k8s\0` envelope: its typeMeta and raw bytes.
fn unwrap(body: &[u8]) -> (String, String, Vec<u8>) {
    let u = Unknown::decode(body.strip_prefix(b"k8s\0").expect("k8s\\0 magic")).unwrap();
    let tm = u.type_meta.unwrap();
    assert_eq!(u.content_type.as_deref(), Some(""));
    assert_eq!(u.content_encoding.as_deref(), Some(""));
    (tm.api_version.unwrap(), tm.kind.unwrap(), u.raw.unwrap())
}

/// Drops what a write changes on every run.
fn normalize(v: &mut Value) {
    let m = &mut v["metadata"];
    for k in ["resourceVersion", "managedFields", "generation"] {
        m.as_object_mut().unwrap().remove(k);
    }
}

/// The standalone binary, serving until dropped, with its kubeconfig written.
struct Standalone(std::process::Child);

impl Standalone {
    async fn start(k: &Kubectl) -> Standalone {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kube-testenv"))
            .args(["--port", "0", "--kubeconfig"])
            .arg(&k.kubeconfig)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // It announces itself on stderr once the kubeconfig is written.
        let stderr = child.stderr.take().unwrap();
        let line = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(stderr), &mut line)
                .map(|_| line)
        });
        let line = line.await.unwrap().unwrap();
        assert!(line.starts_with("kube-testenv serving"), "{line}");
        Standalone(child)
    }
}

impl Drop for Standalone {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_generators_send_protobuf() {
    let k = Kubectl::unconfigured();
    let _server = Standalone::start(&k).await;
    let run = |args: &'static [&'static str]| k.run(args);
    assert_eq!(
        run(&["create", "namespace", "team"]).await.trim(),
        "namespace/team created"
    );
    assert_eq!(
        run(&[
            "create",
            "configmap",
            "cfg",
            "-n",
            "team",
            "--from-literal=k=v"
        ])
        .await
        .trim(),
        "configmap/cfg created"
    );
    assert_eq!(
        run(&[
            "create",
            "secret",
            "generic",
            "s",
            "-n",
            "team",
            "--from-literal=pw=hunter2"
        ])
        .await
        .trim(),
        "secret/s created"
    );
    assert_eq!(
        run(&[
            "create",
            "service",
            "clusterip",
            "web",
            "-n",
            "team",
            "--tcp=80:8080"
        ])
        .await
        .trim(),
        "service/web created"
    );
    let out = run(&[
        "get",
        "configmap",
        "cfg",
        "-n",
        "team",
        "-o",
        "jsonpath={.data.k}",
    ])
    .await;
    assert_eq!(out, "v");
    let out = run(&[
        "get",
        "secret",
        "s",
        "-n",
        "team",
        "-o",
        "jsonpath={.data.pw}",
    ])
    .await;
    assert_eq!(out, "aHVudGVyMg==");
    let out = run(&[
        "get",
        "svc",
        "web",
        "-n",
        "team",
        "-o",
        "jsonpath={.spec.ports[0].targetPort}",
    ]);
    assert_eq!(out.await, "8080");
    // Go's protobuf carries every non-pointer zero (`generateName: ""`, `nodePort: 0`,
    // `publishNotReadyAddresses: false`); stored, they would show where JSON has nothing.
    let svc: Value =
        serde_json::from_str(&run(&["get", "svc", "web", "-n", "team", "-o", "json"]).await)
            .unwrap();
    assert_eq!(svc["metadata"].get("generateName"), None);
    assert_eq!(svc["spec"]["ports"][0].get("nodePort"), None);
    assert_eq!(svc["spec"].get("publishNotReadyAddresses"), None);
    assert_eq!(svc["spec"].get("externalName"), None);
}

/// Every served built-in type: the protobuf GET decodes with k8s-pb, and PUTting those bytes back
/// leaves the JSON object as it was.
#[tokio::test]
async fn every_served_type_round_trips_through_protobuf() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let meta = |name: &str| json!({"name": name, "labels": {"a": "b"}, "annotations": {"n": "1"}});
    let cases: Vec<(&str, Value)> = vec![
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("cm"), "data": {"k": "v"}, "binaryData": {"b": "AAEC"}}),
        ),
        (
            "/api/v1/namespaces/default/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta("s"), "type": "Opaque", "data": {"pw": "aHVudGVyMg=="}}),
        ),
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta("ns")}),
        ),
        (
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": meta("svc"), "spec": {"selector": {"app": "w"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}, {"name": "m", "port": 81, "targetPort": 9090}]}}),
        ),
        (
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": meta("n1"), "spec": {"providerID": "x://1", "taints": [{"key": "k", "effect": "NoSchedule"}]}, "status": {"capacity": {"cpu": "4", "memory": "8Gi"}, "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}}),
        ),
        (
            "/api/v1/namespaces/default/endpoints",
            json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": meta("ep"), "subsets": [{"addresses": [{"ip": "10.1.0.1"}], "ports": [{"port": 80, "protocol": "TCP"}]}]}),
        ),
        (
            "/api/v1/namespaces/default/events",
            json!({"apiVersion": "v1", "kind": "Event", "metadata": meta("ev"), "involvedObject": {"kind": "Node", "name": "n1"}, "reason": "R", "message": "m", "type": "Normal", "count": 2, "firstTimestamp": "2026-12-01T08:00:00Z"}),
        ),
        (
            "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta("p"), "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "500m"}}, "ports": [{"containerPort": 80}]}]}}),
        ),
        (
            "/api/v1/namespaces/default/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("sa")}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta("l"), "spec": {"holderIdentity": "h", "leaseDurationSeconds": 15, "renewTime": "2026-12-01T08:00:00.123456Z"}}),
        ),
        (
            "/apis/events.k8s.io/v1/namespaces/default/events",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": meta("ev2"), "eventTime": "2026-12-01T08:00:00.000000Z", "reportingController": "c", "reportingInstance": "i", "action": "A", "reason": "R", "type": "Normal", "regarding": {"kind": "Node", "name": "n1"}}),
        ),
        (
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta("es"), "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.0.1"], "conditions": {"ready": true}}], "ports": [{"name": "http", "port": 80}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta("cr"), "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta("crb"), "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cr"}, "subjects": [{"kind": "User", "name": "u"}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta("r"), "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("rb"), "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]}),
        ),
        (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"}, "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"size": {"type": "integer", "maximum": 5}, "tags": {"type": "array", "items": {"type": "string"}}}}}}}}]}}),
        ),
    ];
    for (collection, manifest) in cases {
        let created = json(&c, "POST", collection, &manifest).await;
        let name = created["metadata"]["name"].as_str().unwrap();
        let path = format!("{collection}/{name}");
        let (code, ct, body) = send(&c, "GET", &path, &[("accept", PB)], vec![]).await;
        let text = String::from_utf8_lossy(&body);
        assert_eq!((code, ct.as_str()), (200, PB), "{path}: {text}");
        let (api_version, kind, raw) = unwrap(&body);
        assert_eq!(
            (api_version.as_str(), kind.as_str()),
            (
                created["apiVersion"].as_str().unwrap(),
                created["kind"].as_str().unwrap()
            )
        );
        // k8s-pb reads what the server wrote: the name is where protobuf puts it.
        let meta = k8s_meta(&kind, &api_version, &raw);
        assert_eq!(meta.name.as_deref(), Some(name), "{path}");
        assert_eq!(
            meta.uid.as_deref(),
            created["metadata"]["uid"].as_str(),
            "{path}"
        );
        let headers = [("content-type", PB), ("accept", "application/json")];
        let (code, _, put) = send(&c, "PUT", &path, &headers, body).await;
        let mut put: Value = serde_json::from_slice(&put).unwrap();
        assert_eq!(code, 200, "{path}: {put:#}");
        let mut want = created.clone();
        normalize(&mut want);
        normalize(&mut put);
        if kind == "CustomResourceDefinition" {
            // The CRD controller adds status conditions after the create answered.
            put.as_object_mut().unwrap().remove("status");
            want.as_object_mut().unwrap().remove("status");
        }
        assert_eq!(put, want, "{path}");
    }
}

/// ObjectMeta through the typed k8s-pb message of each kind.
fn k8s_meta(kind: &str, api_version: &str, raw: &[u8]) -> pbmeta::ObjectMeta {
    use k8s_pb::api::{coordination, discovery, events, rbac};
    use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    macro_rules! meta {
        ($ty:ty) => {
            <$ty>::decode(raw).unwrap().metadata.unwrap()
        };
    }
    match (api_version, kind) {
        ("v1", "ConfigMap") => meta!(pb::ConfigMap),
        ("v1", "Secret") => meta!(pb::Secret),
        ("v1", "Namespace") => meta!(pb::Namespace),
        ("v1", "Service") => meta!(pb::Service),
        ("v1", "Node") => meta!(pb::Node),
        ("v1", "Endpoints") => meta!(pb::Endpoints),
        ("v1", "Event") => meta!(pb::Event),
        ("v1", "Pod") => meta!(pb::Pod),
        ("v1", "ServiceAccount") => meta!(pb::ServiceAccount),
        (_, "Lease") => meta!(coordination::v1::Lease),
        (_, "Event") => meta!(events::v1::Event),
        (_, "EndpointSlice") => meta!(discovery::v1::EndpointSlice),
        (_, "ClusterRole") => meta!(rbac::v1::ClusterRole),
        (_, "ClusterRoleBinding") => meta!(rbac::v1::ClusterRoleBinding),
        (_, "Role") => meta!(rbac::v1::Role),
        (_, "RoleBinding") => meta!(rbac::v1::RoleBinding),
        (_, "CustomResourceDefinition") => meta!(ext::CustomResourceDefinition),
        other => panic!("no case for {other:?}"),
    }
}

/// The special JSON forms (IntOrString, Quantity, MicroTime, bytes) land in k8s-pb's fields.
#[tokio::test]
async fn special_json_forms_map_to_their_protobuf_messages() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "w"}, "spec": {"ports": [{"name": "a", "port": 80, "targetPort": "http"}, {"name": "b", "port": 81, "targetPort": 9090}]}});
    json(&c, "POST", "/api/v1/namespaces/default/services", &svc).await;
    let (_, _, body) = send(
        &c,
        "GET",
        "/api/v1/namespaces/default/services/w",
        &[("accept", PB)],
        vec![],
    )
    .await;
    let svc = pb::Service::decode(&unwrap(&body).2[..]).unwrap();
    let ports = svc.spec.unwrap().ports;
    let t0 = ports[0].target_port.clone().unwrap();
    let t1 = ports[1].target_port.clone().unwrap();
    assert_eq!((t0.r#type, t0.str_val.as_deref()), (Some(1), Some("http")));
    assert_eq!((t1.r#type, t1.int_val), (Some(0), Some(9090)));
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "binaryData": {"b": "AAEC"}});
    json(&c, "POST", "/api/v1/namespaces/default/configmaps", &cm).await;
    let (_, _, body) = send(
        &c,
        "GET",
        "/api/v1/namespaces/default/configmaps/b",
        &[("accept", PB)],
        vec![],
    )
    .await;
    let cm = pb::ConfigMap::decode(&unwrap(&body).2[..]).unwrap();
    assert_eq!(cm.binary_data["b"], vec![0, 1, 2]);
    let created = cm.metadata.unwrap().creation_timestamp.unwrap();
    assert!(created.seconds.unwrap() > 1_700_000_000);
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"renewTime": "2026-12-01T08:00:00.123456Z"}});
    json(
        &c,
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        &lease,
    )
    .await;
    let (_, _, body) = send(
        &c,
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases/l",
        &[("accept", PB)],
        vec![],
    )
    .await;
    let lease = k8s_pb::api::coordination::v1::Lease::decode(&unwrap(&body).2[..]).unwrap();
    let renew = lease.spec.unwrap().renew_time.unwrap();
    assert_eq!(
        (renew.seconds, renew.nanos),
        (Some(1_796_112_000), Some(123_456_000))
    );
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4"}}});
    json(&c, "POST", "/api/v1/nodes", &node).await;
    let (_, _, body) = send(&c, "GET", "/api/v1/nodes/n", &[("accept", PB)], vec![]).await;
    let node = pb::Node::decode(&unwrap(&body).2[..]).unwrap();
    assert_eq!(
        node.status.unwrap().capacity["cpu"].string.as_deref(),
        Some("4")
    );
}

#[tokio::test]
async fn lists_and_status_errors_are_protobuf() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    for name in ["a", "b"] {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}});
        json(&c, "POST", "/api/v1/namespaces/default/configmaps", &cm).await;
    }
    let path = "/api/v1/namespaces/default/configmaps";
    let (code, ct, body) = send(&c, "GET", path, &[("accept", PB)], vec![]).await;
    assert_eq!((code, ct.as_str()), (200, PB));
    let (api_version, kind, raw) = unwrap(&body);
    assert_eq!(
        (api_version.as_str(), kind.as_str()),
        ("v1", "ConfigMapList")
    );
    let list = pb::ConfigMapList::decode(&raw[..]).unwrap();
    let (_, _, jbody) = send(&c, "GET", path, &[], vec![]).await;
    let jlist: Value = serde_json::from_slice(&jbody).unwrap();
    assert_eq!(
        list.metadata.unwrap().resource_version.as_deref(),
        jlist["metadata"]["resourceVersion"].as_str()
    );
    let names: Vec<_> = list
        .items
        .iter()
        .map(|i| i.metadata.clone().unwrap().name.unwrap())
        .collect();
    let jnames: Vec<_> = jlist["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, jnames);
    assert_eq!(list.items[1].data["k"], "b");
    // A 404 is a Status in the envelope.
    let (code, ct, body) = send(
        &c,
        "GET",
        "/api/v1/namespaces/default/configmaps/nope",
        &[("accept", PB)],
        vec![],
    )
    .await;
    assert_eq!((code, ct.as_str()), (404, PB));
    let (_, kind, raw) = unwrap(&body);
    assert_eq!(kind, "Status");
    let status = pbmeta::Status::decode(&raw[..]).unwrap();
    assert_eq!(status.code, Some(404));
    assert_eq!(status.reason.as_deref(), Some("NotFound"));
    assert_eq!(
        status.message.as_deref(),
        Some("configmaps \"nope\" not found")
    );
}

/// Frames of 4-byte big-endian length, each a WatchEvent whose object is an envelope.
#[tokio::test]
async fn watch_streams_length_prefixed_frames() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}, "data": {"k": "1"}});
    json(&c, "POST", "/api/v1/namespaces/default/configmaps", &cm).await;
    let req = http::Request::builder()
        .uri("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0")
        .header("accept", "application/vnd.kubernetes.protobuf;stream=watch")
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = c.send(req).await.unwrap();
    assert_eq!(
        resp.headers()["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let mut body = resp.into_body();
    let cm2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}, "data": {"k": "2"}});
    json(&c, "PUT", "/api/v1/namespaces/default/configmaps/w", &cm2).await;
    let mut buf = Vec::new();
    let mut events = Vec::new();
    while events.len() < 2 {
        let frame = body.frame().await.unwrap().unwrap();
        buf.extend_from_slice(frame.data_ref().unwrap());
        while buf.len() >= 4 {
            let len = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
            if buf.len() < 4 + len {
                break;
            }
            let ev = pbmeta::WatchEvent::decode(&buf[4..4 + len]).unwrap();
            buf.drain(..4 + len);
            let (_, kind, raw) = unwrap(&ev.object.unwrap().raw.unwrap());
            assert_eq!(kind, "ConfigMap");
            let cm = pb::ConfigMap::decode(&raw[..]).unwrap();
            events.push((ev.r#type.unwrap(), cm.data["k"].clone()));
        }
    }
    assert_eq!(
        events,
        [
            ("ADDED".into(), "1".into()),
            ("MODIFIED".into(), "2".into())
        ]
    );
}

#[tokio::test]
async fn accept_and_content_type_are_negotiated_as_upstream() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let path = "/api/v1/namespaces";
    let ct = |accept: &'static str| {
        let c = c.clone();
        async move {
            let (code, ct, _) = send(&c, "GET", path, &[("accept", accept)], vec![]).await;
            (code, ct)
        }
    };
    // client-go's protobuf clients list protobuf first, then JSON: the first at equal q wins.
    assert_eq!(
        ct("application/vnd.kubernetes.protobuf, application/json")
            .await
            .1,
        PB
    );
    assert_eq!(
        ct("application/json, application/vnd.kubernetes.protobuf")
            .await
            .1,
        "application/json"
    );
    assert_eq!(
        ct("application/json;q=0.5, application/vnd.kubernetes.protobuf")
            .await
            .1,
        PB
    );
    // goautoneg puts an exact type before a wildcard whatever their q, and keeps q=0 clauses.
    assert_eq!(
        ct("*/*, application/vnd.kubernetes.protobuf;q=0.1").await.1,
        PB
    );
    assert_eq!(ct("application/vnd.kubernetes.protobuf;q=0").await.1, PB);
    assert_eq!(
        ct("application/json;q=0.1, application/vnd.kubernetes.protobuf;q=0.5")
            .await
            .1,
        PB
    );
    assert_eq!(ct("*/*").await.1, "application/json");
    let (code, _, body) = send(&c, "GET", path, &[("accept", "text/html")], vec![]).await;
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(code, 406);
    assert_eq!(status["reason"], "NotAcceptable");
    assert_eq!(
        status["message"],
        "only the following media types are accepted: application/json, application/vnd.kubernetes.protobuf"
    );
    // A body that is neither JSON nor protobuf is 415; a broken envelope is 400.
    let (code, _, _) = send(
        &c,
        "POST",
        path,
        &[("content-type", "text/plain")],
        b"x".to_vec(),
    )
    .await;
    assert_eq!(code, 415);
    let (code, _, body) = send(&c, "POST", path, &[("content-type", PB)], b"{}".to_vec()).await;
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(code, 400, "{status:#}");
    assert_eq!(
        status["message"],
        "the object provided is unrecognized: the body has no k8s protobuf envelope"
    );
}

#[tokio::test]
async fn custom_resources_stay_json() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"}, "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    json(
        &c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    )
    .await;
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let mut listed = (0, String::new());
    for _ in 0..100 {
        let (code, ct, _) = send(
            &c,
            "GET",
            path,
            &[(
                "accept",
                "application/vnd.kubernetes.protobuf, application/json",
            )],
            vec![],
        )
        .await;
        listed = (code, ct);
        if code == 200 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(listed, (200, "application/json".to_string()));
    let (code, _, body) = send(&c, "GET", path, &[("accept", PB)], vec![]).await;
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(code, 406);
    assert_eq!(
        status["message"],
        "only the following media types are accepted: application/json"
    );
    let (code, _, _) = send(&c, "POST", path, &[("content-type", PB)], b"k8s\0".to_vec()).await;
    assert_eq!(code, 415);
}

/// client-go sends DeleteOptions as protobuf in the deleted resource's group-version.
#[tokio::test]
async fn delete_options_are_read_from_protobuf() {
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let path = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let lease =
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}});
    json(&c, "POST", path, &lease).await;
    let options = |uid: &str| {
        let raw = pbmeta::DeleteOptions {
            preconditions: Some(pbmeta::Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        let u = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some("coordination.k8s.io/v1".into()),
                kind: Some("DeleteOptions".into()),
            }),
            raw: Some(raw.encode_to_vec()),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        [b"k8s\0".to_vec(), u.encode_to_vec()].concat()
    };
    let headers = [("content-type", PB), ("accept", PB)];
    let (code, ct, body) = send(
        &c,
        "DELETE",
        &format!("{path}/l"),
        &headers,
        options("wrong"),
    )
    .await;
    assert_eq!((code, ct.as_str()), (409, PB));
    let status = pbmeta::Status::decode(&unwrap(&body).2[..]).unwrap();
    assert_eq!(status.reason.as_deref(), Some("Conflict"));
}
