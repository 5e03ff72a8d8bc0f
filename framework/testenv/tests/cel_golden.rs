//! Replays the CRD validation rule captures (tests/golden/cel/*.txt, copied from the shared
//! captures of a v1.23 server) through a real `kube::Client`, and compares every answer with the
//! captured one as a 1.30+ server gives it. Two differences are v1.23's and are rewritten in the
//! expected answers, each from upstream's `schema/cel/validation.go`: a failed rule names its
//! node's schema type as the value (`Invalid value: "object"`), where v1.23 printed the whole
//! value as a Go map; and the order of the errors of sibling fields follows Go's map iteration,
//! random on the real server, so causes are compared by field depth and name (the node's own
//! rules keep their order, and schema errors still come first). The schema validator's own
//! newer wording (`maxLength` as `Too long`) is rewritten too, and so is what newer servers do
//! when such a schema error is found: they run no rule.

mod support;

use http_body_util::BodyExt;
use kube_testenv::TestEnv;
use serde_json::{Value, json};
use support::capture::{Capture, parse};

/// The captures replayed, in capture order.
const SEQUENCE: &[&str] = &[
    "cel-crd-create",
    "cel-cr-valid",
    "cel-cr-rule-message",
    "cel-cr-rule-no-message",
    "cel-cr-several-rules",
    "cel-cr-rule-and-schema",
    "cel-cr-runtime-error",
    "cel-cr-missing-field",
    "cel-cr-update-violated",
    "cel-cr-status-rule",
    "cel-cr-status-rule-main",
];

/// Captures of CRDs the server refuses or takes; checked in `tests/cel_crd.rs`.
const CRD_CAPTURES: &[&str] = &[
    "cel-crd-compile-error",
    "cel-crd-not-bool",
    "cel-crd-cost-exceeded",
    "cel-crd-isurl-oldself-1.23",
];

fn blank(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, val) in m.iter_mut() {
                match (k.as_str(), &*val) {
                    (
                        "uid" | "resourceVersion" | "creationTimestamp" | "time"
                        | "lastTransitionTime",
                        Value::String(_),
                    ) => *val = "<dynamic>".into(),
                    ("manager", Value::String(_)) => *val = "<manager>".into(),
                    _ => blank(val),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(blank),
        _ => {}
    }
}

/// The schema node at a cause's field path (`spec.limits`, `spec.tags`), for its type.
fn schema_type(schema: &Value, field: &str) -> String {
    let mut node = schema;
    for seg in field.split('.') {
        node = &node["properties"][seg];
    }
    node["type"].as_str().unwrap_or("").to_string()
}

/// The rules of the captured CRD: (message the failure shows, rule text) for each.
fn rule_details(schema: &Value, out: &mut Vec<String>) {
    if let Some(rules) = schema["x-kubernetes-validations"].as_array() {
        for r in rules {
            let rule = r["rule"].as_str().unwrap_or_default();
            match r["message"].as_str() {
                Some(m) => out.push(m.to_string()),
                None => out.push(format!("failed rule: {rule}")),
            }
        }
    }
    if let Some(props) = schema["properties"].as_object() {
        props.values().for_each(|p| rule_details(p, out));
    }
}

/// The expected Status as a 1.30+ server words it (see the file's doc).
fn newer_wording(status: &mut Value, schema: &Value) {
    let mut details = Vec::new();
    rule_details(schema, &mut details);
    let Some(causes) = status["details"]["causes"].as_array_mut() else {
        return;
    };
    for c in causes.iter_mut() {
        let field = c["field"].as_str().unwrap_or_default().to_string();
        let message = c["message"].as_str().unwrap_or_default().to_string();
        // Newer servers report `maxLength` as a TooLong error (the schema validator's wording,
        // tested with it in `api::structural`).
        if let Some(n) = message
            .split(" in body should be at most ")
            .nth(1)
            .and_then(|r| r.strip_suffix(" chars long"))
        {
            c["reason"] = "FieldValueTooLong".into();
            c["message"] = format!("Too long: may not be more than {n} bytes").into();
            continue;
        }
        // `Invalid value: <value>: <detail>`; no captured value holds ": ".
        let Some(rest) = message.strip_prefix("Invalid value: ") else {
            continue;
        };
        let Some(cut) = rest.find(": ") else {
            continue;
        };
        let detail = &rest[cut + 2..];
        let rule_detail = details
            .iter()
            .any(|d| detail == d || detail.ends_with(&format!(" evaluating rule: {d}")))
            .then(|| detail.to_string());
        if let Some(detail) = rule_detail {
            let ty = schema_type(schema, &field);
            c["message"] = format!("Invalid value: \"{ty}\": {detail}").into();
        }
    }
    // Newer servers (kubernetes#111519, 1.25) run no rule once a type, required, enum, length or
    // count error is found (`hasBlockingErr`): one fieldless cause says so in place of theirs.
    let blocking = [
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
    ]
    .iter()
    .chain(&["FieldValueTooMany", "FieldValueTypeInvalid"])
    .any(|r| causes.iter().any(|c| c["reason"] == *r));
    if blocking {
        causes.retain(|c| !rule_like(c));
        causes.push(json!({"reason": "FieldValueInvalid", "field": "<nil>",
            "message": "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"}));
    }
    sort_causes(status);
}

/// Causes by field depth, then field (stable), and the message rebuilt from them.
fn sort_causes(status: &mut Value) {
    let Some(causes) = status["details"]["causes"].as_array_mut() else {
        return;
    };
    let schema_errors = causes.iter().take_while(|c| !rule_like(c)).count();
    causes[schema_errors..].sort_by_key(|c| {
        let f = c["field"].as_str().unwrap_or("").to_string();
        (f.matches('.').count(), f)
    });
    let parts: Vec<String> = causes
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect();
    let message = status["message"].as_str().unwrap_or_default();
    let head = message.split(" is invalid: ").next().unwrap_or_default();
    status["message"] = if parts.len() == 1 {
        format!("{head} is invalid: {}", parts[0])
    } else {
        format!("{head} is invalid: [{}]", parts.join(", "))
    }
    .into();
}

/// Whether a cause is a rule's (its value is a schema type name, as 1.30+ servers print it).
fn rule_like(c: &Value) -> bool {
    let m = c["message"].as_str().unwrap_or("");
    ["object", "string", "integer", "array", "number", "boolean"]
        .iter()
        .any(|t| m.starts_with(&format!("Invalid value: \"{t}\": ")))
        && !m.contains(" in body ")
}

async fn send(client: &kube::Client, cap: &Capture) -> (u16, Value) {
    let mut req = http::Request::builder()
        .method(cap.method.as_str())
        .uri(&cap.path)
        .header("user-agent", "Python-urllib/3.12");
    if let Some(ct) = &cap.content_type {
        req = req.header("content-type", ct);
    }
    let body = cap.body.clone().unwrap_or_default().into_bytes();
    let resp = client
        .send(req.body(kube::client::Body::from(body)).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn rule_failures_match_a_real_apiserver() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "cel-cap"}})).unwrap();
    kube::Api::all(client.clone())
        .create(&Default::default(), &ns)
        .await
        .unwrap();
    let crd = parse("cel/cel-crd-create");
    let schema = crd.response["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
    for name in SEQUENCE {
        let cap = parse(&format!("cel/{name}"));
        let (code, mut got) = send(&client, &cap).await;
        let mut want = cap.response.clone();
        if want["kind"] == "Status" {
            newer_wording(&mut want, &schema);
            sort_causes(&mut got);
        }
        blank(&mut got);
        blank(&mut want);
        assert_eq!(code, cap.code, "{name}: status code; body {got:#}");
        assert_eq!(got, want, "{name}:\n got {got:#}\nwant {want:#}");
    }
}

#[test]
fn every_cel_capture_is_replayed_or_checked_elsewhere() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/cel");
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let name = name.trim_end_matches(".txt");
        assert!(
            SEQUENCE.contains(&name) || CRD_CAPTURES.contains(&name),
            "{name} is not replayed"
        );
    }
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/upstream/apiserver-responses/cel");
    if shared.is_dir() {
        for entry in std::fs::read_dir(&shared).unwrap() {
            let file = entry.unwrap().file_name();
            let ours = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/golden/cel")
                .join(&file);
            assert_eq!(
                std::fs::read(&ours).ok(),
                std::fs::read(shared.join(&file)).ok(),
                "{file:?} differs from the shared capture"
            );
        }
    }
}
