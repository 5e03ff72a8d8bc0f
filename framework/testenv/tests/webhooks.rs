//! Replays the admission-webhook captures (`tests/golden/webhooks/wh-*.txt`, copied from the
//! shared captures of a real kube-apiserver v1.23) end to end: a real `kube::Client` sends the
//! captured request to kube-testenv, which calls a real HTTPS webhook server started here; that
//! server answers each review as the captured webhook answered it (the request's uid echoed
//! where the captured answer echoed it). Compared: the status code, the answer, its `Warning`
//! headers, and every review the webhook received, in order, after blanking what differs on
//! every run (uids, resourceVersions, timestamps, the webhook's port).

mod support;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

/// The port the captured webhook listened on.
const CAPTURED_PORT: &str = "127.0.0.1:39465";

/// One captured exchange: the client's request and answer, then the reviews the webhook got.
struct WebhookCapture {
    method: String,
    path: String,
    content_type: Option<String>,
    body: Option<String>,
    code: u16,
    warnings: Vec<String>,
    response: Value,
    /// (path and query, review received, what the webhook answered).
    calls: Vec<(String, Value, String)>,
}

fn golden(name: &str) -> String {
    let path = format!(
        "{}/tests/golden/webhooks/{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Reads a capture, the webhook's address `addr` put where the captured one was.
fn parse(name: &str, addr: SocketAddr, ca_bundle: &str) -> WebhookCapture {
    let text = golden(name).replace(CAPTURED_PORT, &addr.to_string());
    let text = with_ca_bundle(&text, ca_bundle);
    let mut cap = WebhookCapture {
        method: String::new(),
        path: String::new(),
        content_type: None,
        body: None,
        code: 0,
        warnings: Vec::new(),
        response: Value::Null,
        calls: Vec::new(),
    };
    // Sections: the answer, then per call its review and what was answered.
    let mut sections: Vec<(String, String)> = vec![(String::new(), String::new())];
    for line in text.lines() {
        let Some(h) = line.strip_prefix("# ") else {
            if let Some(last) = sections.last_mut() {
                last.1.push_str(line);
                last.1.push('\n');
            }
            continue;
        };
        if let Some(ct) = h.strip_prefix("Content-Type: ") {
            cap.content_type = Some(ct.to_string());
        } else if let Some(b) = h.strip_prefix("body: ") {
            cap.body = Some(b.to_string());
        } else if let Some(c) = h.strip_prefix("HTTP ") {
            cap.code = c.trim().parse().unwrap();
        } else if let Some(w) = h.strip_prefix("Warning: ") {
            cap.warnings.push(w.to_string());
        } else if h.starts_with("call ") || h.starts_with("answered ") {
            sections.push((h.to_string(), String::new()));
        } else if cap.method.is_empty()
            && let Some((m, p)) = h.split_once(' ')
            && m.chars().all(|c| c.is_ascii_uppercase())
        {
            cap.method = m.to_string();
            cap.path = p.to_string();
        }
    }
    let mut sections = sections.into_iter();
    let (_, answer) = sections.next().unwrap();
    cap.response = json_or_lines(answer.as_bytes());
    while let (Some((call, review)), Some((_, answered))) = (sections.next(), sections.next()) {
        let path = call.split_whitespace().nth(3).unwrap().to_string();
        let review = serde_json::from_str(&review).unwrap_or_else(|e| panic!("{name}: {e}"));
        cap.calls.push((path, review, answered.trim().to_string()));
    }
    cap
}

/// `text` with every `caBundle` value the test webhook's.
fn with_ca_bundle(text: &str, ca_bundle: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("\"caBundle\":") {
        let (head, tail) = rest.split_at(at + "\"caBundle\":".len());
        out.push_str(head);
        let Some(open) = tail.find('"') else {
            rest = tail;
            break;
        };
        let close = tail[open + 1..]
            .find('"')
            .map_or(tail.len(), |c| open + 1 + c);
        out.push_str(&tail[..open + 1]);
        out.push_str(ca_bundle);
        rest = &tail[close..];
    }
    out.push_str(rest);
    out
}

/// What the test webhook answers next, per path, and what it received.
#[derive(Default)]
struct Script {
    answers: VecDeque<(String, Value, String)>,
    received: Vec<(String, Value)>,
}

/// An HTTPS webhook on loopback with its own CA; answers from `script`.
struct Webhook {
    addr: SocketAddr,
    ca_bundle: String,
    script: Arc<Mutex<Script>>,
}

async fn webhook() -> Webhook {
    // Its name as a Service `wh-svc` in `wh-cap` too, for `clientConfig.service`.
    let support::tls::Loopback {
        listener,
        addr,
        acceptor,
        ca_bundle,
    } = support::tls::loopback(&["127.0.0.1", "wh-svc.wh-cap.svc"]).await;
    let script = Arc::new(Mutex::new(Script::default()));
    let shared = script.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let Ok(tls) = acceptor.accept(tcp).await else {
                continue;
            };
            let script = shared.clone();
            let service = hyper::service::service_fn(move |req: http::Request<_>| {
                let script = script.clone();
                async move { answer(&script, req).await }
            });
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(tls);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    Webhook {
        addr,
        ca_bundle,
        script,
    }
}

/// The captured answer to the next review on the request's path.
async fn answer(
    script: &Mutex<Script>,
    req: http::Request<hyper::body::Incoming>,
) -> Result<http::Response<Full<bytes::Bytes>>, std::convert::Infallible> {
    let path = req.uri().to_string();
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let review: Value = serde_json::from_slice(&body).unwrap();
    if let Some(text) = broken_answer(&path, &review) {
        let code = if path.starts_with("/own-500") {
            500
        } else {
            200
        };
        return Ok(reply(code, text));
    }
    if let Some(answer) = own_answer(&path, &review).await {
        return Ok(reply(200, answer.to_string()));
    }
    if path.starts_with("/convert") {
        script
            .lock()
            .unwrap()
            .received
            .push((path.clone(), review.clone()));
        return Ok(reply(200, converted(&path, &review).to_string()));
    }
    let next = {
        let mut s = script.lock().unwrap();
        s.received.push((path.clone(), review.clone()));
        let at = s.answers.iter().position(|(p, _, _)| *p == path);
        at.and_then(|i| s.answers.remove(i))
    };
    let Some((_, captured, answered)) = next else {
        return Ok(reply(500, format!("no answer scripted for {path}")));
    };
    if path.starts_with("/slow") {
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    if let Some(text) = answered.strip_prefix("HTTP 500 ") {
        let mut r = reply(500, text.to_string());
        r.headers_mut()
            .insert("content-type", "text/plain".parse().unwrap());
        return Ok(r);
    }
    let Ok(mut out) = serde_json::from_str::<Value>(&answered) else {
        return Ok(reply(200, answered));
    };
    let captured_uid = &captured["request"]["uid"];
    if out.pointer("/response/uid") == Some(captured_uid) {
        out["response"]["uid"] = review["request"]["uid"].clone();
    }
    Ok(reply(200, out.to_string()))
}

/// The answers of the tests that replay no capture: `/own-deny` refuses, `/own-warn` allows
/// with a warning, `/own-slow` allows after 5 s.
async fn own_answer(path: &str, review: &Value) -> Option<Value> {
    let uid = review["request"]["uid"].clone();
    let response = match path.split('?').next().unwrap() {
        "/own-deny" => json!({"uid": uid, "allowed": false,
            "status": {"code": 403, "message": "refused by the test webhook"}}),
        "/own-warn" => json!({"uid": uid, "allowed": true, "warnings": ["from the test webhook"]}),
        // Refuses, saying what it got: the object's spec, its kind's and the request's version.
        "/own-echo" => {
            let r = &review["request"];
            let said = format!(
                "{} as {} for {}",
                r["object"]["spec"], r["kind"]["version"], r["requestKind"]["version"]
            );
            json!({"uid": uid, "allowed": false, "status": {"message": said}})
        }
        "/own-slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            json!({"uid": uid, "allowed": true})
        }
        _ => return None,
    };
    Some(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

/// A broken answer for the failure-policy test: bad JSON, an HTTP 500, another uid, another
/// kind, a patch without `patchType`, a patch that does not apply.
fn broken_answer(path: &str, review: &Value) -> Option<String> {
    let uid = review["request"]["uid"].clone();
    let review = |kind: &str, response: Value| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": kind, "response": response}).to_string()
    };
    // `[{"op": "replace", "path": "/spec/nothing/here", "value": 1}]` and `[]`, base64.
    let (bad_path, empty) = (
        "W3sib3AiOiAicmVwbGFjZSIsICJwYXRoIjogIi9zcGVjL25vdGhpbmcvaGVyZSIsICJ2YWx1ZSI6IDF9XQ==",
        "W10=",
    );
    Some(match path.split('?').next().unwrap() {
        "/own-bad-json" => "{not json".into(),
        "/own-500" => "boom".into(),
        "/own-wrong-uid" => review("AdmissionReview", json!({"uid": "other", "allowed": true})),
        "/own-wrong-kind" => review("Nope", json!({"uid": uid, "allowed": true})),
        "/own-no-patchtype" => review(
            "AdmissionReview",
            json!({"uid": uid, "allowed": true, "patch": empty}),
        ),
        "/own-bad-path" => review(
            "AdmissionReview",
            json!({"uid": uid, "allowed": true, "patch": bad_path, "patchType": "JSONPatch"}),
        ),
        _ => return None,
    })
}

/// The conversion webhook of the captures: `spec.size` (v1alpha1) is `spec.replicas` (v1);
/// `/convert-label` adds a label, the others answer as their capture shows (a Failure, a
/// renamed object, no objects, another version).
fn converted(path: &str, review: &Value) -> Value {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap();
    let path = path.split('?').next().unwrap();
    let result = match path {
        "/convert-fail" => {
            json!({"status": "Failure", "message": "cannot convert widget: size out of range"})
        }
        _ => json!({"status": "Success"}),
    };
    let mut objects: Vec<Value> = request["objects"].as_array().unwrap().clone();
    for o in &mut objects {
        let spec = o["spec"].as_object_mut().unwrap();
        let (from, to) = match desired.ends_with("/v1") {
            true => ("size", "replicas"),
            false => ("replicas", "size"),
        };
        if let Some(v) = spec.remove(from) {
            spec.insert(to.into(), v);
        }
        o["apiVersion"] = desired.into();
        match path {
            "/convert-label" => o["metadata"]["labels"] = json!({"converted-by": "webhook"}),
            "/convert-rename" => o["metadata"]["name"] = "w1-renamed".into(),
            "/convert-wrong-version" => o["apiVersion"] = "wh.example.com/v9".into(),
            _ => {}
        }
    }
    let mut response = json!({"uid": request["uid"], "result": result});
    match path {
        "/convert-fail" => {}
        "/convert-count" => response["convertedObjects"] = json!([]),
        _ => response["convertedObjects"] = json!(objects),
    }
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response})
}

fn reply(code: u16, body: String) -> http::Response<Full<bytes::Bytes>> {
    http::Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(body.into()))
        .unwrap()
}

/// One webhook of a configuration the capture was taken with.
struct Hook {
    /// `Validating` or `Mutating`.
    phase: &'static str,
    /// The configuration's name.
    configuration: &'static str,
    /// The webhook's.
    name: &'static str,
    /// The URL's path (`/down` at port 1: nothing listens).
    path: &'static str,
    /// Merged over the common fields.
    extra: Value,
}

fn hook(phase: &'static str, label: &'static str, path: &'static str, extra: Value) -> Hook {
    let name: &'static str = Box::leak(format!("{label}.wh.example.com").into_boxed_str());
    Hook {
        phase,
        configuration: name,
        name,
        path,
        extra: merge(
            json!({"objectSelector": {"matchLabels": {"wh": label}}}),
            extra,
        ),
    }
}

fn merge(mut a: Value, b: Value) -> Value {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}

fn configuration(h: &Hook, wh: &Webhook) -> (String, Value) {
    let url = match h.path {
        "/down" => "https://127.0.0.1:1/down".to_string(),
        p => format!("https://{}{p}", wh.addr),
    };
    let webhook = merge(
        json!({
            "name": h.name,
            "clientConfig": {"url": url, "caBundle": wh.ca_bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        }),
        h.extra.clone(),
    );
    let plural = format!("{}webhookconfigurations", h.phase.to_lowercase());
    let kind = format!("{}WebhookConfiguration", h.phase);
    let body = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": h.configuration}, "webhooks": [webhook]});
    (
        format!("/apis/admissionregistration.k8s.io/v1/{plural}"),
        body,
    )
}

/// Blanks what differs on every run, and the user.
fn normalize(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, val) in m.iter_mut() {
                match (k.as_str(), &*val) {
                    (
                        "uid" | "resourceVersion" | "creationTimestamp" | "time",
                        Value::String(_),
                    ) => *val = "<dynamic>".into(),
                    ("clusterIP", Value::String(s)) if s != "None" => *val = "<ip>".into(),
                    ("clusterIPs", Value::Array(_)) => *val = json!(["<ip>"]),
                    ("nodePort", Value::Number(_)) => *val = 0.into(),
                    // A Table row's last cell is the object's age.
                    ("cells", Value::Array(cells)) if !cells.is_empty() => {
                        let mut cells = cells.clone();
                        let last = cells.len() - 1;
                        cells[last] = "<age>".into();
                        *val = Value::Array(cells);
                    }
                    ("message", Value::String(s)) => *val = uuids_blanked(s).into(),
                    // The capture cluster's admin was `admin` (uid `admin-uid`); kube-testenv's
                    // is `kubernetes-admin`.
                    ("userInfo", Value::Object(_)) => *val = "<user>".into(),
                    _ => normalize(val),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(normalize),
        _ => {}
    }
}

/// `s` with every UUID replaced by `<uid>` (the wrong-uid refusal names the review's).
fn uuids_blanked(s: &str) -> String {
    let shape = |w: &str| {
        let parts: Vec<&str> = w.split('-').collect();
        parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
            && w.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
    };
    let mut out = String::new();
    let mut rest = s;
    while !rest.is_empty() {
        if rest.len() >= 36 && rest.is_char_boundary(36) && shape(&rest[..36]) {
            out.push_str("<uid>");
            rest = &rest[36..];
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Option<String>,
    table: bool,
) -> (u16, Vec<String>, Value) {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("user-agent", "Python-urllib/3.10");
    if table {
        req = req.header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io");
    }
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let body = body.unwrap_or_default().into_bytes();
    let resp = client
        .send(req.body(kube::client::Body::from(body)).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, warnings, json_or_lines(&bytes))
}

/// A JSON answer, or a watch's events (one JSON document a line) as an array.
fn json_or_lines(text: &[u8]) -> Value {
    serde_json::from_slice(text).unwrap_or_else(|_| {
        let lines = text
            .split(|b| *b == b'\n')
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace));
        lines
            .map(|l| serde_json::from_slice(l).unwrap_or(Value::Null))
            .collect()
    })
}

/// A cluster with namespace `wh-cap` (and `wh-cap-on`, labelled `wh-ns=on`), the webhook, the
/// configurations `hooks` and the objects `before` (path, body) created.
async fn cluster(hooks: &[Hook], before: &[(&str, Value)]) -> (TestEnv, Webhook) {
    let env = TestEnv::start().await.unwrap();
    let wh = webhook().await;
    let client = env.client();
    let mut setup: Vec<(String, Value)> = vec![
        (
            "/api/v1/namespaces".into(),
            json!({"metadata": {"name": "wh-cap"}}),
        ),
        (
            "/api/v1/namespaces".into(),
            json!({"metadata": {"name": "wh-cap-on", "labels": {"wh-ns": "on"}}}),
        ),
    ];
    setup.extend(before.iter().map(|(p, b)| (p.to_string(), b.clone())));
    setup.extend(hooks.iter().map(|h| configuration(h, &wh)));
    for (path, body) in setup {
        let (code, _, got) = send(
            &client,
            "POST",
            &path,
            Some("application/json"),
            Some(body.to_string()),
            false,
        )
        .await;
        assert_eq!(code, 201, "setup {path}: {got:#}");
    }
    (env, wh)
}

/// Replays capture `name` against `env`, its webhook `wh` scripted with the captured answers.
async fn replay(env: &TestEnv, wh: &Webhook, name: &str) {
    let cap = parse(name, wh.addr, &wh.ca_bundle);
    {
        let mut s = wh.script.lock().unwrap();
        s.received.clear();
        s.answers = cap.calls.iter().cloned().collect();
    }
    let (code, warnings, mut got) = send(
        &env.client(),
        &cap.method,
        &cap.path,
        cap.content_type.as_deref(),
        cap.body.clone(),
        cap.response["kind"] == "Table",
    )
    .await;
    // A timed-out webhook's late answer is still counted, as the capture lists it.
    if cap.calls.iter().any(|(p, _, _)| p.starts_with("/slow")) {
        tokio::time::sleep(Duration::from_millis(2500)).await;
    }
    let mut want = cap.response.clone();
    normalize(&mut got);
    normalize(&mut want);
    assert_eq!(code, cap.code, "{name}: status code; body {got:#}");
    assert_eq!(got, want, "{name}:\n got {got:#}\nwant {want:#}");
    assert_eq!(warnings, cap.warnings, "{name}: Warning headers");
    let received = std::mem::take(&mut wh.script.lock().unwrap().received);
    if name.starts_with("conv-") {
        // How many ConversionReviews a request takes is the real server's own (its watch cache
        // converts too): each one sent must be one the real server sent for that request.
        let mut wanted: Vec<Value> = cap.calls.into_iter().map(|(_, r, _)| r).collect();
        wanted.iter_mut().for_each(normalize_review);
        for (_, mut got) in received {
            normalize_review(&mut got);
            // A patch converts the stored object first, which the real server took from its
            // watch cache, already converted.
            // A watch's objects came from the real server's watch cache, converted for the
            // earlier requests (conv-watch-old-version.txt lists no review).
            if cap.path.contains("watch=true") {
                continue;
            }
            let old_for_patch = cap.method == "PATCH"
                && got.pointer("/request/objects/0/apiVersion")
                    == Some(&json!("wh.example.com/v1"));
            if old_for_patch {
                continue;
            }
            assert!(
                wanted.contains(&got),
                "{name}: review not sent by the real server: {got:#}\nwanted one of {wanted:#?}"
            );
        }
        return;
    }
    let paths: Vec<&str> = received.iter().map(|(p, _)| p.as_str()).collect();
    let want_paths: Vec<&str> = cap.calls.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(paths, want_paths, "{name}: calls");
    for (i, ((_, mut got), (_, mut want, _))) in received.into_iter().zip(cap.calls).enumerate() {
        normalize(&mut got);
        normalize(&mut want);
        assert_eq!(
            got,
            want,
            "{name}: review {}:\n got {got:#}\nwant {want:#}",
            i + 1
        );
    }
}

/// A review, blanked, without the resourceVersion the real server's watch cache sometimes adds.
fn normalize_review(v: &mut Value) {
    normalize(v);
    if let Some(objects) = v
        .pointer_mut("/request/objects")
        .and_then(Value::as_array_mut)
    {
        for o in objects {
            if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
        }
    }
}

fn validating(label: &'static str, path: &'static str) -> Hook {
    hook("Validating", label, path, json!({}))
}

/// Captures each replayed by one webhook, a validating one unless said otherwise.
#[tokio::test]
async fn validating_webhook_answers_and_failures_match_a_real_apiserver() {
    let hooks = [
        validating("allow", "/allow"),
        validating("warn", "/allow-warn"),
        validating("deny-bare", "/deny-bare"),
        validating("deny-message", "/deny-message"),
        validating("deny-code", "/deny-code"),
        validating("deny-code-200", "/deny-code-200"),
        validating("bad-json", "/bad-json"),
        validating("http-500", "/http-500"),
        validating("wrong-uid", "/wrong-uid"),
        validating("wrong-kind", "/wrong-kind"),
        validating("no-response", "/no-response"),
        validating("down-fail", "/down"),
        hook(
            "Validating",
            "down-ignore",
            "/down",
            json!({"failurePolicy": "Ignore"}),
        ),
        hook(
            "Validating",
            "slow-fail",
            "/slow",
            json!({"timeoutSeconds": 1}),
        ),
        hook(
            "Validating",
            "slow-ignore",
            "/slow",
            json!({"timeoutSeconds": 1, "failurePolicy": "Ignore"}),
        ),
        hook(
            "Validating",
            "v1beta1",
            "/allow",
            json!({"admissionReviewVersions": ["v1beta1"]}),
        ),
        hook("Validating", "dry", "/allow", json!({})),
        hook(
            "Validating",
            "dry-some",
            "/allow",
            json!({"sideEffects": "NoneOnDryRun"}),
        ),
        hook(
            "Validating",
            "ns",
            "/allow",
            json!({"namespaceSelector": {"matchLabels": {"wh-ns": "on"}}}),
        ),
    ];
    let (env, wh) = cluster(&hooks, &[]).await;
    for name in VALIDATING {
        replay(&env, &wh, name).await;
    }
}

const VALIDATING: &[&str] = &[
    "wh-validating-allow-create",
    "wh-validating-warnings",
    "wh-validating-deny-bare",
    "wh-validating-deny-message",
    "wh-validating-deny-code",
    "wh-validating-deny-code-200",
    "wh-validating-bad-json",
    "wh-validating-http-500",
    "wh-validating-wrong-uid",
    "wh-validating-wrong-kind",
    "wh-validating-no-response",
    "wh-validating-unreachable-fail",
    "wh-validating-unreachable-ignore",
    "wh-validating-timeout-fail",
    "wh-validating-timeout-ignore",
    "wh-validating-v1beta1",
    "wh-validating-dryrun",
    "wh-validating-dryrun-noneondryrun",
    "wh-validating-namespace-selector-miss",
    "wh-validating-namespace-selector-hit",
];

/// The update and delete of the object `wh-validating-allow-create` made.
#[tokio::test]
async fn validating_webhooks_see_updates_and_deletes_as_a_real_apiserver_sends_them() {
    let all = json!({"rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""],
        "apiVersions": ["v1"], "resources": ["configmaps"]}]});
    let (env, wh) = cluster(&[hook("Validating", "allow", "/allow", all)], &[]).await;
    for name in [
        "wh-validating-allow-create",
        "wh-validating-allow-update",
        "wh-validating-allow-delete",
    ] {
        replay(&env, &wh, name).await;
    }
}

/// Captures of mutating webhooks, each with the configurations it was taken with.
#[tokio::test]
async fn mutating_webhooks_match_a_real_apiserver() {
    let mutating = |label, path| hook("Mutating", label, path, json!({}));
    let hooks = [
        mutating("mutate", "/mutate"),
        mutating("bad-path", "/mutate-bad-path"),
        mutating("no-patchtype", "/mutate-no-patchtype"),
        mutating("mv", "/mutate"),
        validating("mv", "/allow"),
        // wh-mutating-order-reinvocation.txt's note: configurations z-reinvoke (webhook y) and
        // a-reinvoke (webhook x, reinvocationPolicy IfNeeded).
        Hook {
            configuration: "z-reinvoke",
            name: "y.wh.example.com",
            ..mutating("reinvoke", "/mutate-a")
        },
        Hook {
            configuration: "a-reinvoke",
            name: "x.wh.example.com",
            extra: merge(
                json!({"objectSelector": {"matchLabels": {"wh": "reinvoke"}}}),
                json!({"reinvocationPolicy": "IfNeeded"}),
            ),
            ..mutating("reinvoke", "/mutate-b")
        },
    ];
    let (env, wh) = cluster(&hooks, &[]).await;
    for name in MUTATING {
        replay(&env, &wh, name).await;
    }
}

const MUTATING: &[&str] = &[
    "wh-mutating-patch",
    "wh-mutating-patch-apply",
    "wh-mutating-bad-path",
    "wh-mutating-no-patchtype",
    "wh-mutating-then-validating",
    "wh-mutating-order-reinvocation",
];

/// A rule for `services/status` (wh-subresource-*.txt).
#[tokio::test]
async fn subresource_rules_match_a_real_apiserver() {
    let status = json!({"rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
        "resources": ["services/status"]}], "objectSelector": {}});
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "sub-1", "labels": {"wh": "sub"}},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}});
    let (env, wh) = cluster(
        &[hook("Validating", "status", "/deny-message", status)],
        &[("/api/v1/namespaces/wh-cap/services", svc)],
    )
    .await;
    for name in [
        "wh-subresource-status-patch",
        "wh-subresource-main-not-matched",
    ] {
        replay(&env, &wh, name).await;
    }
}

/// Configuration validation and defaults (wh-config-*.txt): no webhook is called.
#[tokio::test]
async fn webhook_configurations_are_validated_and_defaulted_as_a_real_apiserver_does() {
    let env = TestEnv::start().await.unwrap();
    let wh = webhook().await;
    for name in CONFIG {
        replay(&env, &wh, name).await;
    }
}

const CONFIG: &[&str] = &[
    "wh-config-bad-names",
    "wh-config-defaults",
    "wh-config-defaults-mutating",
    "wh-config-http-url",
    "wh-config-missing-reviewversions",
    "wh-config-missing-sideeffects",
    "wh-config-timeout-31",
    "wh-config-url-and-service",
];

/// The conv-* captures in the order they were taken, on one CRD (`widgets.wh.example.com`,
/// `v1alpha1` served through the webhook, `v1` stored); before each, the conversion webhook's
/// path its capture's calls name (`None`: unchanged; `STRATEGY_NONE`: strategy `None`).
const CONVERSION_SEQUENCE: &[(&str, Option<&str>)] = &[
    ("conv-crd-create", None),
    ("conv-create-old-version", None),
    ("conv-get-old-version", None),
    ("conv-get-storage-version", None),
    ("conv-list-old-version", None),
    ("conv-patch-old-version", None),
    ("conv-table-old-version", None),
    ("conv-watch-old-version", None),
    ("conv-webhook-changes-labels", Some("/convert-label")),
    ("conv-webhook-failure-get", Some("/convert-fail")),
    ("conv-webhook-failure-list", None),
    ("conv-webhook-failure-create", None),
    ("conv-webhook-renames", Some("/convert-rename")),
    ("conv-webhook-wrong-count", Some("/convert-count")),
    ("conv-webhook-wrong-version", Some("/convert-wrong-version")),
    ("conv-webhook-unreachable", Some("/down")),
    ("conv-webhook-unreachable-storage-version", None),
    ("conv-none-get-old-version", Some(STRATEGY_NONE)),
    ("conv-crd-none-with-webhook", None),
    ("conv-crd-webhook-missing-config", None),
];

const STRATEGY_NONE: &str = "strategy None";

#[tokio::test]
async fn conversion_webhooks_match_a_real_apiserver() {
    let (env, wh) = cluster(&[], &[]).await;
    let client = env.client();
    let crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.wh.example.com";
    for (name, path) in CONVERSION_SEQUENCE {
        let conversion = match *path {
            None => None,
            Some(STRATEGY_NONE) => Some(json!({"strategy": "None", "webhook": null})),
            Some("/down") => {
                Some(json!({"webhook": {"clientConfig": {"url": "https://127.0.0.1:1/down"}}}))
            }
            Some(p) => Some(
                json!({"webhook": {"clientConfig": {"url": format!("https://{}{p}", wh.addr)}}}),
            ),
        };
        if let Some(conversion) = conversion {
            let patch = json!({"spec": {"conversion": conversion}}).to_string();
            let ct = Some("application/merge-patch+json");
            let (code, _, got) = send(&client, "PATCH", crd, ct, Some(patch), false).await;
            assert_eq!(code, 200, "{name}: setting the conversion: {got:#}");
        }
        replay(&env, &wh, name).await;
        if *name == "conv-get-storage-version" {
            // The list capture has a second Widget, made through v1 between the two.
            let w2 = json!({"apiVersion": "wh.example.com/v1", "kind": "Widget",
                "metadata": {"name": "w2"}, "spec": {"replicas": 5}});
            let path = "/apis/wh.example.com/v1/namespaces/wh-cap/widgets";
            let ct = Some("application/json");
            let (code, _, got) = send(&client, "POST", path, ct, Some(w2.to_string()), false).await;
            assert_eq!(code, 201, "w2: {got:#}");
        }
    }
}

/// Captures not replayed, with why.
const NOT_REPLAYED: &[(&str, &str)] = &[];

#[test]
fn every_webhook_capture_is_replayed_or_excused() {
    let dir = format!("{}/tests/golden/webhooks", env!("CARGO_MANIFEST_DIR"));
    let known: Vec<&str> = [VALIDATING, MUTATING, CONFIG]
        .concat()
        .into_iter()
        .chain([
            "wh-validating-allow-update",
            "wh-validating-allow-delete",
            "wh-subresource-status-patch",
            "wh-subresource-main-not-matched",
        ])
        .chain(NOT_REPLAYED.iter().map(|(n, _)| *n))
        .chain(CONVERSION_SEQUENCE.iter().map(|(n, _)| *n))
        .collect();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let file = entry.unwrap().file_name().into_string().unwrap();
        let name = file.strip_suffix(".txt").unwrap();
        assert!(
            known.contains(&name),
            "{dir}/{file} is neither replayed nor excused"
        );
    }
}

/// A configuration written for a cluster, `clientConfig.service`, reaches the webhook through
/// the Service's endpoints, with TLS checking the name `<service>.<namespace>.svc`.
#[tokio::test]
async fn a_service_reference_reaches_the_webhook_through_its_endpoints() {
    let (env, wh) = cluster(&[], &[]).await;
    let client = env.client();
    let port = wh.addr.port();
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "wh-svc"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}});
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "wh-svc-1", "labels": {"kubernetes.io/service-name": "wh-svc"}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1"]}],
        "ports": [{"name": "https", "port": port}]});
    let hook = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "svc.wh.example.com"},
        "webhooks": [{"name": "svc.wh.example.com",
            "clientConfig": {"service": {"namespace": "wh-cap", "name": "wh-svc", "path": "/own-deny"},
                "caBundle": wh.ca_bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "objectSelector": {"matchLabels": {"wh": "svc"}}}]});
    for (path, body) in [
        ("/api/v1/namespaces/wh-cap/services", svc),
        (
            "/apis/discovery.k8s.io/v1/namespaces/wh-cap/endpointslices",
            slice,
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            hook,
        ),
    ] {
        let (code, _, got) = send(
            &client,
            "POST",
            path,
            Some("application/json"),
            Some(body.to_string()),
            false,
        )
        .await;
        assert_eq!(code, 201, "{path}: {got:#}");
    }
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "labels": {"wh": "svc"}}});
    let path = "/api/v1/namespaces/wh-cap/configmaps";
    let (code, _, got) = send(
        &client,
        "POST",
        path,
        Some("application/json"),
        Some(cm.to_string()),
        false,
    )
    .await;
    assert_eq!(code, 403, "{got:#}");
    assert_eq!(
        got["message"],
        "admission webhook \"svc.wh.example.com\" denied the request: refused by the test webhook"
    );
}

/// A webhook that answers late costs its own write its timeout and holds no other request:
/// the store lock is not held while it is called.
#[tokio::test]
async fn a_slow_webhook_holds_no_other_request() {
    let slow = hook(
        "Validating",
        "own-slow",
        "/own-slow",
        json!({"timeoutSeconds": 2, "failurePolicy": "Ignore"}),
    );
    let (env, wh) = cluster(&[slow], &[]).await;
    let client = env.client();
    let path = "/api/v1/namespaces/wh-cap/configmaps";
    let cm = |name: &str, label: &str| {
        let v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"wh": label}}});
        Some(v.to_string())
    };
    let started = std::time::Instant::now();
    let slow_write = {
        let client = client.clone();
        let body = cm("slow", "own-slow");
        tokio::spawn(async move {
            send(&client, "POST", path, Some("application/json"), body, false).await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (code, _, got) = send(
        &client,
        "POST",
        path,
        Some("application/json"),
        cm("quick", "other"),
        false,
    )
    .await;
    assert_eq!(code, 201, "{got:#}");
    let (code, _, _) = send(&client, "GET", path, None, None, false).await;
    assert_eq!(code, 200);
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "other requests waited: {:?}",
        started.elapsed()
    );
    let (code, _, got) = slow_write.await.unwrap();
    assert_eq!(code, 201, "{got:#}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "the slow write took {took:?}"
    );
    drop(wh);
}

/// kubectl, an independent client, sees a webhook's refusal and warnings as on a cluster.
#[tokio::test]
async fn kubectl_shows_a_webhooks_refusal_and_warnings() {
    let hooks = [
        validating("own-deny", "/own-deny"),
        validating("own-warn", "/own-warn"),
    ];
    let (env, _wh) = cluster(&hooks, &[]).await;
    let kubectl = support::kubectl::Kubectl::new(&env);
    let manifest = |label: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {label}\n  namespace: wh-cap\n  labels:\n    wh: {label}\n"
        )
    };
    let denied = kubectl.write("denied.yaml", &manifest("own-deny"));
    let (ok, _, err) = kubectl
        .try_run(&["apply", "-f", denied.to_str().unwrap()])
        .await;
    assert!(!ok);
    assert!(
        err.contains("admission webhook \"own-deny.wh.example.com\" denied the request: refused by the test webhook"),
        "{err}"
    );
    let warned = kubectl.write("warned.yaml", &manifest("own-warn"));
    let (ok, out, err) = kubectl
        .try_run(&["apply", "-f", warned.to_str().unwrap()])
        .await;
    assert!(ok, "{err}");
    assert!(out.contains("configmap/own-warn created"), "{out}");
    assert!(err.contains("Warning: from the test webhook"), "{err}");
}

/// Under `failurePolicy: Ignore` a failed call lets the write through, whatever the failure;
/// a patch that does not apply fails it all the same (upstream's internal error, not a failed
/// call), as under `Fail` (wh-mutating-bad-path.txt).
#[tokio::test]
async fn failure_policy_ignore_lets_every_failed_call_through() {
    let ignore = json!({"failurePolicy": "Ignore"});
    let mut hooks: Vec<Hook> = ["own-bad-json", "own-500", "own-wrong-uid", "own-wrong-kind"]
        .into_iter()
        .map(|label| {
            let path: &'static str = Box::leak(format!("/{label}").into_boxed_str());
            hook("Validating", label, path, ignore.clone())
        })
        .collect();
    for label in ["own-no-patchtype", "own-bad-path"] {
        let path: &'static str = Box::leak(format!("/{label}").into_boxed_str());
        hooks.push(hook("Mutating", label, path, ignore.clone()));
    }
    let (env, _wh) = cluster(&hooks, &[]).await;
    let client = env.client();
    let path = "/api/v1/namespaces/wh-cap/configmaps";
    for h in &hooks {
        let label = h.name.trim_end_matches(".wh.example.com");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": label, "labels": {"wh": label}}});
        let body = Some(cm.to_string());
        let (code, _, got) =
            send(&client, "POST", path, Some("application/json"), body, false).await;
        if label == "own-bad-path" {
            assert_eq!(code, 500, "{label}: {got:#}");
            assert_eq!(
                got["message"],
                "Internal error occurred: replace operation does not apply: doc is missing path: /spec/nothing/here: missing value"
            );
        } else {
            assert_eq!(code, 201, "{label}: {got:#}");
        }
    }
}

/// `matchPolicy: Equivalent`: a rule naming `v1` of a custom resource matches a write through
/// `v1alpha1`, and the webhook gets the object converted to `v1` by the CRD's conversion webhook
/// (its `kind` v1, its `requestKind` v1alpha1); `Exact` does not match it.
#[tokio::test]
async fn an_equivalent_rule_gets_the_object_in_the_version_it_names() {
    let v1_rule = |policy: &str| {
        json!({"matchPolicy": policy, "objectSelector": {},
            "rules": [{"operations": ["CREATE"], "apiGroups": ["wh.example.com"], "apiVersions": ["v1"], "resources": ["widgets"]}]})
    };
    let (env, wh) = cluster(&[], &[]).await;
    let client = env.client();
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties":
        {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
    let versions: Vec<Value> = ["v1alpha1", "v1"]
        .iter()
        .map(|v| json!({"name": v, "served": true, "storage": *v == "v1", "schema": schema}))
        .collect();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.wh.example.com"},
        "spec": {"group": "wh.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": versions,
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("https://{}/convert", wh.addr), "caBundle": wh.ca_bundle}}}}});
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let ct = Some("application/json");
    let (code, _, got) = send(&client, "POST", crds, ct, Some(crd.to_string()), false).await;
    assert_eq!(code, 201, "{got:#}");
    let exact = configuration(
        &hook("Validating", "exact", "/own-echo", v1_rule("Exact")),
        &wh,
    );
    let (code, _, got) = send(
        &client,
        "POST",
        &exact.0,
        ct,
        Some(exact.1.to_string()),
        false,
    )
    .await;
    assert_eq!(code, 201, "{got:#}");
    let widgets = "/apis/wh.example.com/v1alpha1/namespaces/wh-cap/widgets";
    let widget = |name: &str| {
        let w = json!({"apiVersion": "wh.example.com/v1alpha1", "kind": "Widget",
            "metadata": {"name": name}, "spec": {"size": 2}});
        Some(w.to_string())
    };
    let (code, _, got) = send(&client, "POST", widgets, ct, widget("w1"), false).await;
    assert_eq!(
        code, 201,
        "an Exact v1 rule matched a v1alpha1 write: {got:#}"
    );
    let equivalent = configuration(
        &hook(
            "Validating",
            "equivalent",
            "/own-echo",
            v1_rule("Equivalent"),
        ),
        &wh,
    );
    let (code, _, got) = send(
        &client,
        "POST",
        &equivalent.0,
        ct,
        Some(equivalent.1.to_string()),
        false,
    )
    .await;
    assert_eq!(code, 201, "{got:#}");
    let (code, _, got) = send(&client, "POST", widgets, ct, widget("w2"), false).await;
    assert_eq!(code, 400, "{got:#}");
    assert_eq!(
        got["message"],
        "admission webhook \"equivalent.wh.example.com\" denied the request: {\"replicas\":2} as \"v1\" for \"v1alpha1\""
    );
}
