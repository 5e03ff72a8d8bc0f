//! Replays the requests captured from a real kube-apiserver (tests/golden/*.txt, copied from the
//! shared captures) in their original order and compares every response with the captured one,
//! after blanking what differs on every run (uid, resourceVersion, timestamps, allocated IPs and
//! ports, condition transition times). managedFields are compared too: every request is sent
//! as `curl` sent them, so writes that name no fieldManager are recorded under the same manager.

mod support;

use http_body_util::BodyExt;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbmeta;
use kube_testenv::TestEnv;
use prost::Message;
use serde_json::Value;
use support::capture::{Capture, parse};

/// Blanks run-specific values.
fn normalize(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, val) in m.iter_mut() {
                match (k.as_str(), &*val) {
                    (
                        "uid" | "resourceVersion" | "creationTimestamp" | "deletionTimestamp"
                        | "continue" | "lastTransitionTime" | "time",
                        Value::String(_),
                    ) => *val = "<dynamic>".into(),
                    ("clusterIP", Value::String(s)) if s != "None" => *val = "<ip>".into(),
                    ("clusterIPs", Value::Array(_)) => *val = serde_json::json!(["<ip>"]),
                    // Entries are sorted by their (blanked) time first, so their order is as
                    // run-specific as the times are.
                    ("managedFields", Value::Array(_)) => {
                        normalize(val);
                        if let Value::Array(a) = val {
                            a.sort_by_key(|e| e.to_string());
                        }
                    }
                    ("nodePort" | "healthCheckNodePort", Value::Number(_)) => *val = 0.into(),
                    // The ServiceAccount admission's volume name ends in 5 random characters.
                    ("name", Value::String(s)) if s.starts_with("kube-api-access-") => {
                        *val = "kube-api-access-<random>".into()
                    }
                    _ => normalize(val),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(normalize),
        _ => {}
    }
}

const SEQUENCE: &[&str] = &[
    "node-create",
    "node-status-patch-condition",
    "node-strategic-patch-taints",
    "svc-create-lb",
    "svc-status-patch-ingress",
    "svc-status-patch-finalizer",
    "svc-patch-immutable-clusterip",
    "svc-delete-with-finalizer",
    "svc-get-terminating",
    "svc-remove-finalizer",
    "svc-get-after-finalizer-removed",
    "node-create-alreadyexists",
    "node-create-invalid-name",
    "node-get-notfound",
    "node-update-stale-rv",
    "nodes-list-fieldselector-bad",
    "nodes-list-labelselector",
    "cm-create-missing-namespace",
    "node-unsupported-patch-type",
    "lease-create",
    "node-apply-ssa",
    "cm-apply-create",
    "cm-apply-conflict",
    "cm-apply-force",
    "cm-update-records-manager",
    "cm-apply-drop-field",
    "cm-apply-force-missing-manager",
];

/// A CRD's life: created, established, discovered; custom resources defaulted and pruned,
/// refused with schema causes, their generation bumped by spec changes and not by status ones,
/// printed with the CRD's columns; strategic merge refused; the CRD deleted.
const CRD_SEQUENCE: &[&str] = &[
    "crd-create",
    "crd-get-established",
    "crd-discovery-group-version",
    "cr-create-defaulted-pruned",
    "cr-create-invalid",
    "cr-create-missing-required",
    "cr-patch-spec-generation",
    "cr-status-patch",
    "cr-table",
    "cr-strategic-patch-refused",
    "crd-delete",
];

/// Strategic merge patch directives on Nodes and their status, in capture order (the `-setup`
/// files create the objects the next ones patch).
const SMP_SEQUENCE: &[&str] = &[
    "node-smp-setup-empty",
    "node-status-smp-replace-on-empty-list",
    "node-status-smp-replace-on-full-list",
    "node-smp-setup-empty2",
    "node-status-smp-merge-on-empty-list",
    "node-status-smp-merge-same-ip-two-types",
    "node-smp-setup-full",
    "node-smp-status-setup",
    "node-status-smp-delete-one-address",
    "node-status-smp-replace-to-empty",
    "node-status-smp-setelementorder",
    "node-smp-delete-from-primitive-list",
    "node-smp-setelementorder-finalizers",
    "node-smp-label-null",
    "node-smp-map-replace",
    "node-smp-retainkeys-refused",
    "node-smp-unknown-directive",
    "node-smp-taints-atomic",
];

/// The smallest object of each built-in kind as the server defaults and converts it, in capture
/// order, in a namespace `golden-defaults` the capture run had made first.
const DEFAULTS_SEQUENCE: &[&str] = &[
    "defaults-secret-stringdata",
    "defaults-secret-stringdata-overrides",
    "defaults-secret-tls-invalid",
    "defaults-configmap",
    "defaults-service-clusterip",
    "defaults-service-nodeport",
    "defaults-service-externalname",
    "defaults-service-lb-local",
    "defaults-endpoints",
    "defaults-endpointslice",
    "defaults-namespace",
    "defaults-serviceaccount",
    "defaults-lease-empty",
    "defaults-clusterrole",
    "defaults-clusterrolebinding",
    "defaults-role",
    "defaults-rolebinding",
    "defaults-node-minimal",
    // The patch's answer holds the PUT's data: the PUT came first (its file is from a rerun).
    "defaults-secret-put-stringdata",
    "defaults-secret-patch-stringdata",
    "defaults-event-core-node",
    "defaults-event-core-wrong-namespace",
    "defaults-event-events-v1-node",
    "defaults-event-events-v1-wrong-namespace",
];

/// Captures another suite replays (the file named), checked to name them.
const REPLAYED_ELSEWHERE: &[(&str, &str)] = &[
    (
        "anonymous-forbidden-list-nodes",
        include_str!("auth_golden.rs"),
    ),
    ("bad-token-unauthorized", include_str!("auth_golden.rs")),
    ("rbac-forbidden-list-nodes", include_str!("auth_golden.rs")),
    ("sar-nonresource-denied", include_str!("auth_golden.rs")),
    ("sar-resource-allowed", include_str!("auth_golden.rs")),
    ("tokenrequest-create", include_str!("auth_golden.rs")),
    ("tokenreview-invalid", include_str!("auth_golden.rs")),
    ("tokenreview-valid", include_str!("auth_golden.rs")),
    ("protobuf-get-configmap", include_str!("protobuf_golden.rs")),
    ("protobuf-get-notfound", include_str!("protobuf_golden.rs")),
    (
        "protobuf-watch-configmap",
        include_str!("protobuf_golden.rs"),
    ),
];

/// Captures no suite replays, and why.
const NOT_REPLAYED: &[(&str, &str)] = &[
    (
        "nodes-list-limit1",
        "lists the capture cluster's own nodes (their names and count); tests/list.rs covers limit, continue and remainingItemCount",
    ),
    (
        "watch-stream",
        "a watch stream, one event per line, not one answer; tests/watch.rs covers its shape",
    ),
    (
        "watch-expired-410",
        "a watch stream's ERROR event; tests/watch.rs covers the 410",
    ),
    (
        "watch-response-headers",
        "response headers only; tests/watch.rs checks them",
    ),
    (
        "defaults-pod",
        "not matched yet: kube-testenv gives Pods `generation: 1` (newer servers do, v1.23 did not) and its creator's entry a `.` under `f:containers`",
    ),
    ("defaults-pod-latest-tag", "as defaults-pod"),
    (
        "defaults-service-headless",
        "the capture cluster was dual-stack (a selector-less headless Service got RequireDualStack, [IPv4, IPv6]); kube-testenv serves one IPv4 range",
    ),
];

fn golden_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn txt_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".txt").map(str::to_string))
        .collect();
    names.sort();
    names
}

#[test]
fn every_golden_file_is_replayed_or_excused() {
    for (name, suite) in REPLAYED_ELSEWHERE {
        assert!(
            suite.contains(&format!("\"{name}\"")),
            "{name}: not in its suite"
        );
    }
    let known: Vec<&str> = [SEQUENCE, CRD_SEQUENCE, SMP_SEQUENCE, DEFAULTS_SEQUENCE]
        .concat()
        .into_iter()
        .chain(REPLAYED_ELSEWHERE.iter().map(|(n, _)| *n))
        .chain(NOT_REPLAYED.iter().map(|(n, _)| *n))
        .collect();
    for name in txt_names(&golden_dir()) {
        assert!(
            known.contains(&name.as_str()),
            "tests/golden/{name}.txt is neither replayed nor listed in NOT_REPLAYED"
        );
    }
    for name in &known {
        assert!(
            golden_dir().join(format!("{name}.txt")).exists(),
            "{name}.txt missing"
        );
    }
}

/// The shared captures (`../shared` beside the repository) each have an identical copy here.
#[test]
fn every_shared_capture_has_an_identical_copy() {
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/upstream/apiserver-responses");
    if !shared.is_dir() {
        return;
    }
    for name in txt_names(&shared) {
        let file = format!("{name}.txt");
        let theirs = std::fs::read(shared.join(&file)).unwrap();
        let ours = std::fs::read(golden_dir().join(&file))
            .unwrap_or_else(|_| panic!("tests/golden/{file} missing: copy it from {shared:?}"));
        assert!(
            ours == theirs,
            "tests/golden/{file} differs from the shared capture"
        );
    }
}

/// A captured PUT carries the real server's uid and resourceVersion; an update meant to succeed
/// gets this server's instead.
async fn current_identity(client: &kube::Client, cap: &Capture, body: String) -> String {
    if cap.method != "PUT" || cap.code >= 300 {
        return body;
    }
    let path = cap.path.split('?').next().unwrap_or_default();
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    let live: Value = client.request(req).await.unwrap();
    let mut sent: Value = serde_json::from_str(&body).unwrap();
    for k in ["uid", "resourceVersion"] {
        sent["metadata"][k] = live["metadata"][k].clone();
    }
    sent.to_string()
}

#[tokio::test]
async fn responses_match_a_real_apiserver() {
    replay(SEQUENCE).await;
}

#[tokio::test]
async fn crd_responses_match_a_real_apiserver() {
    replay(CRD_SEQUENCE).await;
}

#[tokio::test]
async fn strategic_merge_patches_match_a_real_apiserver() {
    replay(SMP_SEQUENCE).await;
}

#[tokio::test]
async fn defaults_match_a_real_apiserver() {
    replay(DEFAULTS_SEQUENCE).await;
}

async fn replay(sequence: &[&str]) {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    if sequence == DEFAULTS_SEQUENCE {
        let ns =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "golden-defaults"}}));
        let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
        api.create(&Default::default(), &ns.unwrap()).await.unwrap();
    }
    for name in sequence {
        let cap = parse(name);
        let mut req = http::Request::builder()
            .method(cap.method.as_str())
            .uri(&cap.path)
            .header("user-agent", "curl/8.5.0");
        if let Some(ct) = &cap.content_type {
            req = req.header("content-type", ct);
        }
        if cap.response["kind"] == "Table" {
            // Captured with kubectl's Accept header for server-side printing.
            req = req.header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io");
        }
        let body = match cap.body.clone() {
            Some(b) => current_identity(&client, &cap, b).await.into_bytes(),
            None => Vec::new(),
        };
        let resp = client
            .send(req.body(kube::client::Body::from(body)).unwrap())
            .await
            .unwrap();
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let mut got: Value =
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut want = cap.response;
        normalize(&mut got);
        normalize(&mut want);
        assert_eq!(code, cap.code, "{name}: status code; body {got:#}");
        assert_eq!(got, want, "{name}:\n got {got:#}\nwant {want:#}");
    }
}

/// An object's metadata as client-go's protobuf marshaller writes it: every non-pointer field,
/// zero or not, and the zero `creationTimestamp` as an empty Timestamp.
fn client_go_meta(name: &str) -> pbmeta::ObjectMeta {
    pbmeta::ObjectMeta {
        name: Some(name.into()),
        generate_name: Some(String::new()),
        namespace: Some(String::new()),
        self_link: Some(String::new()),
        uid: Some(String::new()),
        resource_version: Some(String::new()),
        generation: Some(0),
        creation_timestamp: Some(pbmeta::Time::default()),
        ..Default::default()
    }
}

/// Go's zero `time.Time`, 0001-01-01T00:00:00Z, in Unix seconds.
const YEAR_ONE: i64 = -62_135_596_800;

/// A client-go protobuf request body: the `k8s\0` envelope around the object.
fn client_go_body(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat()
}

/// The captured Event creates sent as client-go sends them, over protobuf: the same fields,
/// every other non-pointer field as its Go zero, zero times as year-1 or empty Timestamps.
/// kube-apiserver decodes those as unset, so it answers as it answered the JSON (issue 36 item 7).
/// managedFields aside: this server records the empty `source` protobuf carries as a field set
/// (`f:source`), where upstream compares with a zero object that has one too.
#[tokio::test]
async fn client_go_protobuf_events_match_a_real_apiserver() {
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::api::events::v1 as events;
    let empty = || Some(String::new());
    let reference = |kind: &str, name: &str| core::ObjectReference {
        kind: Some(kind.into()),
        name: Some(name.into()),
        namespace: empty(),
        uid: empty(),
        api_version: empty(),
        resource_version: empty(),
        field_path: empty(),
    };
    let source = core::EventSource {
        component: empty(),
        host: empty(),
    };
    let core_event = core::Event {
        metadata: Some(client_go_meta("golden-ev")),
        involved_object: Some(reference("Node", "n1")),
        reason: Some("Test".into()),
        message: Some("m".into()),
        source: Some(source.clone()),
        first_timestamp: Some(pbmeta::Time::default()),
        last_timestamp: Some(pbmeta::Time {
            seconds: Some(YEAR_ONE),
            nanos: Some(0),
        }),
        count: Some(0),
        r#type: empty(),
        event_time: Some(pbmeta::MicroTime {
            seconds: Some(YEAR_ONE),
            nanos: Some(0),
        }),
        series: None,
        action: empty(),
        related: None,
        reporting_component: empty(),
        reporting_instance: empty(),
    };
    let events_event = events::Event {
        metadata: Some(client_go_meta("golden-ev2")),
        event_time: Some(pbmeta::MicroTime {
            seconds: Some(1_796_083_200), // 2026-12-01T00:00:00Z
            nanos: Some(0),
        }),
        series: None,
        reporting_controller: Some("x/y".into()),
        reporting_instance: Some("i".into()),
        action: Some("A".into()),
        reason: Some("R".into()),
        regarding: Some(reference("Node", "n1")),
        related: None,
        note: empty(),
        r#type: Some("Normal".into()),
        deprecated_source: Some(source),
        deprecated_first_timestamp: Some(pbmeta::Time {
            seconds: Some(YEAR_ONE),
            nanos: Some(0),
        }),
        deprecated_last_timestamp: Some(pbmeta::Time::default()),
        deprecated_count: Some(0),
    };
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let cases = [
        (
            "defaults-event-core-node",
            client_go_body("v1", "Event", core_event.encode_to_vec()),
        ),
        (
            "defaults-event-events-v1-node",
            client_go_body("events.k8s.io/v1", "Event", events_event.encode_to_vec()),
        ),
    ];
    for (name, body) in cases {
        let cap = parse(name);
        let req = http::Request::builder()
            .method("POST")
            .uri(&cap.path)
            .header("user-agent", "curl/8.5.0")
            .header("content-type", "application/vnd.kubernetes.protobuf")
            .header("accept", "application/json")
            .body(kube::client::Body::from(body))
            .unwrap();
        let resp = client.send(req).await.unwrap();
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let mut got: Value = serde_json::from_slice(&bytes).unwrap();
        let mut want = cap.response;
        normalize(&mut got);
        normalize(&mut want);
        for v in [&mut got, &mut want] {
            v["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("managedFields");
        }
        assert_eq!(code, 201, "{name}: {got:#}");
        assert_eq!(got, want, "{name}:\n got {got:#}\nwant {want:#}");
    }
}
