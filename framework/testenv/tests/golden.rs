//! Replays the requests captured from a real kube-apiserver (tests/golden/*.txt, copied from the
//! shared captures) in their original order and compares every response with the captured one,
//! after blanking what differs on every run (uid, resourceVersion, timestamps, allocated IPs and
//! ports, condition transition times). managedFields are compared too: every request is sent
//! as `curl` sent them, so writes that name no fieldManager are recorded under the same manager.

mod support;

use http_body_util::BodyExt;
use kube_testenv::TestEnv;
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
                    ("nodePort", Value::Number(_)) => *val = 0.into(),
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

async fn replay(sequence: &[&str]) {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
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
