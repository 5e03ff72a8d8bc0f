//! Where kube-testenv's webhooks could differ from kube-apiserver's without any capture showing
//! it, each checked over HTTP with a real `kube::Client` against a real TLS webhook server
//! started here: what a validating webhook sees of a Service (its allocations), which of several
//! refusals wins, conversion of Table and metadata reads (JSON and protobuf, get, list and
//! watch), `v1beta1` ConversionReviews, one review per listed object, and hostile webhooks that
//! dribble their body or send an endless header block.

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How the test webhook answers one request.
enum Reply {
    /// A JSON body.
    Json(Value),
    /// A JSON body after a delay.
    Late(Duration, Value),
    /// A chunked body of one space every 100 ms, never ending.
    Dribble,
    /// A header block that never ends (16 MiB of one header, then silence).
    EndlessHead,
}

type Handler = Arc<dyn Fn(&str, &Value) -> Reply + Send + Sync>;

/// An HTTPS webhook on loopback with its own CA, answering as `handler` says; it keeps every
/// request's path and body.
struct Server {
    addr: SocketAddr,
    ca_bundle: String,
    received: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    fn taken(&self) -> Vec<(String, Value)> {
        std::mem::take(&mut self.received.lock().unwrap())
    }
}

async fn server(handler: Handler) -> Server {
    let support::tls::Loopback {
        listener,
        addr,
        acceptor,
        ca_bundle,
    } = support::tls::loopback(&["127.0.0.1"]).await;
    let received = Arc::new(Mutex::new(Vec::new()));
    let kept = received.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, handler, kept) = (acceptor.clone(), handler.clone(), kept.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Some((path, body)) = read_request(&mut tls).await else {
                    return;
                };
                let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                kept.lock().unwrap().push((path.clone(), review.clone()));
                let reply = handler(&path, &review);
                let _ = write_reply(&mut tls, reply).await;
            });
        }
    });
    Server {
        addr,
        ca_bundle,
        received,
    }
}

/// One HTTP/1.1 request: its path (without the query) and its body (by `Content-Length`).
async fn read_request<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = s.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let path = head
        .split_whitespace()
        .nth(1)?
        .split('?')
        .next()?
        .to_string();
    let length: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = s.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((path, buf[head_end..head_end + length].to_vec()))
}

async fn write_reply<S: tokio::io::AsyncWrite + Unpin>(
    s: &mut S,
    reply: Reply,
) -> std::io::Result<()> {
    let json = |v: Value| {
        let body = v.to_string();
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    match reply {
        Reply::Json(v) => s.write_all(json(v).as_bytes()).await?,
        Reply::Late(delay, v) => {
            tokio::time::sleep(delay).await;
            s.write_all(json(v).as_bytes()).await?;
        }
        Reply::Dribble => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
            s.write_all(head.as_bytes()).await?;
            loop {
                s.write_all(b"1\r\n \r\n").await?;
                s.flush().await?;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Reply::EndlessHead => {
            s.write_all(b"HTTP/1.1 200 OK\r\nX-Pad: ").await?;
            let pad = vec![b'a'; 1 << 20];
            for _ in 0..16 {
                s.write_all(&pad).await?;
            }
            s.flush().await?;
            std::future::pending::<()>().await;
        }
    }
    s.flush().await
}

/// An AdmissionReview answer to `review`.
fn admission(review: &Value, response: Value) -> Value {
    let mut response = response;
    response["uid"] = review["request"]["uid"].clone();
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// A request with `accept`, its status and body.
async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<Value>,
    accept: &str,
) -> (u16, bytes::Bytes) {
    let mut req = http::Request::builder().method(method).uri(path);
    if !accept.is_empty() {
        req = req.header("accept", accept);
    }
    let body = match body {
        Some(b) => {
            req = req.header("content-type", "application/json");
            b.to_string().into_bytes()
        }
        None => Vec::new(),
    };
    let resp = client
        .send(req.body(kube::client::Body::from(body)).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    (code, resp.into_body().collect().await.unwrap().to_bytes())
}

/// Creates `body` at `path`, asserting a 201.
async fn create(client: &kube::Client, path: &str, body: Value) {
    let (code, got) = send(client, "POST", path, Some(body), "").await;
    assert_eq!(code, 201, "POST {path}: {}", String::from_utf8_lossy(&got));
}

/// A webhook configuration (`Validating` or `Mutating`) of one webhook named `name` at `url`,
/// for `rules`, with `extra` merged over the webhook.
fn configuration(
    phase: &str,
    name: &str,
    url: &str,
    ca: &str,
    rules: Value,
    extra: Value,
) -> (String, Value) {
    let mut webhook = json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca},
        "rules": rules,
        "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 10,
    });
    if let (Some(w), Value::Object(extra)) = (webhook.as_object_mut(), extra) {
        w.extend(extra);
    }
    let path = format!(
        "/apis/admissionregistration.k8s.io/v1/{}webhookconfigurations",
        phase.to_lowercase()
    );
    let body = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": format!("{phase}WebhookConfiguration"),
        "metadata": {"name": name}, "webhooks": [webhook]});
    (path, body)
}

fn rules(resource: &str, operations: &[&str]) -> Value {
    json!([{"operations": operations, "apiGroups": [""], "apiVersions": ["v1"], "resources": [resource]}])
}

/// kube-apiserver's Service storage allocates a Service's clusterIP and nodePorts in its
/// `BeginCreate` / `BeginUpdate`, which the generic store runs before the validating admission
/// it was handed, and after the mutating webhooks: a validating webhook sees the addresses the
/// Service is stored with, a mutating one none.
#[tokio::test]
async fn a_validating_webhook_sees_a_services_allocations_and_a_mutating_one_does_not() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let srv = server(Arc::new(|_, review| {
        Reply::Json(admission(review, json!({"allowed": true})))
    }))
    .await;
    create(
        &client,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "alloc"}}),
    )
    .await;
    let ops = ["CREATE", "UPDATE"];
    for (phase, name, path) in [
        ("Mutating", "m.example.com", "/m"),
        ("Validating", "v.example.com", "/v"),
    ] {
        let (at, body) = configuration(
            phase,
            name,
            &srv.url(path),
            &srv.ca_bundle,
            rules("services", &ops),
            json!({}),
        );
        create(&client, &at, body).await;
    }
    let api: Api<Service> = Api::namespaced(client.clone(), "alloc");
    let svc: Service = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"type": "NodePort", "ports": [{"port": 80}]}}))
    .unwrap();
    let stored =
        serde_json::to_value(api.create(&PostParams::default(), &svc).await.unwrap()).unwrap();
    let ip = &stored["spec"]["clusterIP"];
    let node_port = &stored["spec"]["ports"][0]["nodePort"];
    assert!(ip.is_string() && node_port.is_number(), "{stored:#}");
    let seen = srv.taken();
    let object = |path: &str| {
        seen.iter()
            .find(|(p, _)| p == path)
            .map(|(_, r)| r["request"]["object"].clone())
            .unwrap()
    };
    let (mutating, validating) = (object("/m"), object("/v"));
    assert_eq!(mutating["spec"].get("clusterIP"), None, "{mutating:#}");
    assert_eq!(
        mutating["spec"]["ports"][0].get("nodePort"),
        None,
        "{mutating:#}"
    );
    assert_eq!(&validating["spec"]["clusterIP"], ip, "{validating:#}");
    assert_eq!(&validating["spec"]["clusterIPs"], &json!([ip]));
    assert_eq!(&validating["spec"]["ports"][0]["nodePort"], node_port);

    // An update that needs a nodePort: allocated before the validating webhook, not the mutating.
    let internal: Service = serde_json::from_value(json!({"metadata": {"name": "internal"},
        "spec": {"ports": [{"port": 81}]}}))
    .unwrap();
    api.create(&PostParams::default(), &internal).await.unwrap();
    srv.taken();
    let patch = Patch::Merge(json!({"spec": {"type": "NodePort"}}));
    let patched = api
        .patch("internal", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let patched = serde_json::to_value(patched).unwrap();
    let node_port = &patched["spec"]["ports"][0]["nodePort"];
    assert!(node_port.is_number(), "{patched:#}");
    let seen = srv.taken();
    let object = |path: &str| {
        seen.iter()
            .find(|(p, _)| p == path)
            .map(|(_, r)| r["request"]["object"].clone())
            .unwrap()
    };
    assert_eq!(object("/m")["spec"]["ports"][0].get("nodePort"), None);
    assert_eq!(&object("/v")["spec"]["ports"][0]["nodePort"], node_port);
}

/// The clusterIP a validating webhook approved is taken by another Service while the webhook
/// thinks: the first write starts again, with a new address its webhook approves in turn, and
/// the two Services never share one.
#[tokio::test]
async fn an_address_taken_while_the_webhook_thinks_is_allocated_again() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let srv = server(Arc::new(|_, review| {
        let allow = admission(review, json!({"allowed": true}));
        match review["request"]["name"].as_str() {
            Some("first") => Reply::Late(Duration::from_millis(800), allow),
            _ => Reply::Json(allow),
        }
    }))
    .await;
    let (at, body) = configuration(
        "Validating",
        "v.example.com",
        &srv.url("/v"),
        &srv.ca_bundle,
        rules("services", &["CREATE"]),
        json!({}),
    );
    create(&client, &at, body).await;
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let first: Service = serde_json::from_value(json!({"metadata": {"name": "first"},
        "spec": {"ports": [{"port": 80}]}}))
    .unwrap();
    let creating = {
        let api = api.clone();
        tokio::spawn(async move { api.create(&PostParams::default(), &first).await })
    };
    let shown = loop {
        let seen = srv.received.lock().unwrap().clone();
        if let Some((_, r)) = seen.first() {
            break r["request"]["object"]["spec"]["clusterIP"]
                .as_str()
                .unwrap()
                .to_string();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let second: Service = serde_json::from_value(json!({"metadata": {"name": "second"},
        "spec": {"clusterIP": shown, "ports": [{"port": 80}]}}))
    .unwrap();
    api.create(&PostParams::default(), &second).await.unwrap();
    let stored = creating.await.unwrap().unwrap();
    let ip = stored.spec.unwrap().cluster_ip.unwrap();
    assert_ne!(ip, shown, "two Services hold {ip}");
    let reviews: Vec<String> = srv
        .taken()
        .iter()
        .filter(|(_, r)| r["request"]["name"] == "first")
        .map(|(_, r)| {
            r["request"]["object"]["spec"]["clusterIP"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        reviews,
        [shown, ip],
        "the webhook approved each address it was shown"
    );
}

/// Upstream's validating dispatcher returns the refusal it receives first, and webhooks refuse
/// in the order they answer: the quick webhook's refusal wins over the slow one's, though the
/// slow one comes first in configuration order. (Two that answer at the same moment make
/// upstream's choice a race; this one is not.)
#[tokio::test]
async fn the_refusal_that_arrives_first_wins() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let srv = server(Arc::new(|path, review| {
        let deny = |m: &str| admission(review, json!({"allowed": false, "status": {"message": m}}));
        match path {
            "/slow" => Reply::Late(Duration::from_millis(1500), deny("the slow one refuses")),
            _ => Reply::Json(deny("the quick one refuses")),
        }
    }))
    .await;
    for (name, path) in [
        ("a-slow.example.com", "/slow"),
        ("b-quick.example.com", "/quick"),
    ] {
        let (at, body) = configuration(
            "Validating",
            name,
            &srv.url(path),
            &srv.ca_bundle,
            rules("configmaps", &["CREATE"]),
            json!({}),
        );
        create(&client, &at, body).await;
    }
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "refused"}})).unwrap();
    let err = api.create(&PostParams::default(), &cm).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        status.message,
        "admission webhook \"b-quick.example.com\" denied the request: the quick one refuses"
    );
    assert_eq!(srv.taken().len(), 2, "both were called");
}

/// The conversion webhook of these tests: `spec.size` (v1alpha1) is `spec.replicas` (v1), and
/// it labels what it converts. `/beta` answers in `v1beta1` with another uid (upstream checks
/// no uid in a `v1beta1` review), `/beta-as-v1` and `/v1-as-beta` in the version not asked.
fn convert(path: &str, review: &Value) -> Reply {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap_or("");
    let mut objects = request["objects"].as_array().cloned().unwrap_or_default();
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
        o["metadata"]["labels"] = json!({"converted-by": "webhook"});
    }
    let uid = match path {
        "/beta" => json!("not the request's"),
        _ => request["uid"].clone(),
    };
    let version = match path {
        "/beta" | "/v1-as-beta" => "apiextensions.k8s.io/v1beta1",
        _ => "apiextensions.k8s.io/v1",
    };
    Reply::Json(json!({"apiVersion": version, "kind": "ConversionReview",
        "response": {"uid": uid, "result": {"status": "Success"}, "convertedObjects": objects}}))
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// Widgets stored in `v1`, served as `v1alpha1` through the webhook at `url`, each version with
/// its own printer column.
fn widget_crd(url: &str, ca: &str, review_versions: &[&str]) -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.wh.example.com"},
        "spec": {"group": "wh.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false, "schema": schema,
                 "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]},
                {"name": "v1", "served": true, "storage": true, "schema": schema,
                 "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}]}],
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": url, "caBundle": ca},
                "conversionReviewVersions": review_versions}}}})
}

/// A cluster with the Widget CRD converted by `path` and two Widgets (`w1`, `w2`) stored.
async fn widgets(path: &str, review_versions: &[&str]) -> (TestEnv, Server) {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let srv = server(Arc::new(convert)).await;
    create(
        &client,
        CRDS,
        widget_crd(&srv.url(path), &srv.ca_bundle, review_versions),
    )
    .await;
    for (name, replicas) in [("w1", 3), ("w2", 5)] {
        let w = json!({"apiVersion": "wh.example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"replicas": replicas}});
        create(
            &client,
            "/apis/wh.example.com/v1/namespaces/default/widgets",
            w,
        )
        .await;
    }
    assert!(
        srv.taken().is_empty(),
        "writes through the storage version convert nothing"
    );
    (env, srv)
}

const OLD: &str = "/apis/wh.example.com/v1alpha1/namespaces/default/widgets";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

fn metadata(format: &str, list: bool) -> String {
    let kind = if list {
        "PartialObjectMetadataList"
    } else {
        "PartialObjectMetadata"
    };
    format!("application/{format};as={kind};g=meta.k8s.io;v=v1")
}

/// The first event of a watch of `path` with `accept`: its frame's bytes (a JSON line, or a
/// protobuf frame).
async fn first_event(client: &kube::Client, path: &str, accept: &str) -> bytes::Bytes {
    let req = http::Request::get(format!(
        "{path}?watch=true&fieldSelector=metadata.name%3Dw1&timeoutSeconds=5"
    ))
    .header("accept", accept)
    .body(kube::client::Body::empty())
    .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut got = Vec::new();
    let read = async {
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.unwrap().into_data() {
                got.extend_from_slice(&data);
            }
            let json_line = accept.starts_with("application/json") && got.contains(&b'\n');
            if json_line || (!accept.starts_with("application/json") && got.len() > 4) {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .unwrap();
    bytes::Bytes::from(got)
}

/// Table and metadata-only reads through a converted version go through the webhook as whole
/// objects do (the server converts, then makes the Table or the metadata): get, list and watch,
/// JSON and (metadata) protobuf. The Table's `Size` column and the webhook's label show it.
#[tokio::test]
async fn table_and_metadata_reads_through_another_version_are_converted() {
    let (env, srv) = widgets("/convert", &["v1"]).await;
    let client = env.client();
    let labelled = |v: &Value| v["metadata"]["labels"]["converted-by"] == "webhook";

    // Table: the v1alpha1 column, filled from the converted object.
    let (code, got) = send(&client, "GET", &format!("{OLD}/w1"), None, TABLE).await;
    assert_eq!(code, 200);
    let table: Value = serde_json::from_slice(&got).unwrap();
    let size = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .position(|c| c["name"] == "Size")
        .unwrap();
    assert_eq!(table["rows"][0]["cells"][size], 3, "get: {table:#}");
    assert!(labelled(&table["rows"][0]["object"]), "{table:#}");
    let (_, got) = send(&client, "GET", OLD, None, TABLE).await;
    let table: Value = serde_json::from_slice(&got).unwrap();
    let sizes: Vec<&Value> = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["cells"][size])
        .collect();
    assert_eq!(sizes, [&json!(3), &json!(5)], "list: {table:#}");
    let event: Value = serde_json::from_slice(&first_event(&client, OLD, TABLE).await).unwrap();
    assert_eq!(event["type"], "ADDED");
    assert_eq!(
        event["object"]["rows"][0]["cells"][size], 3,
        "watch: {event:#}"
    );
    assert!(labelled(&event["object"]["rows"][0]["object"]), "{event:#}");

    // Metadata only, JSON.
    let (_, got) = send(
        &client,
        "GET",
        &format!("{OLD}/w1"),
        None,
        &metadata("json", false),
    )
    .await;
    let partial: Value = serde_json::from_slice(&got).unwrap();
    assert_eq!(partial["kind"], "PartialObjectMetadata");
    assert!(labelled(&partial), "get: {partial:#}");
    let (_, got) = send(&client, "GET", OLD, None, &metadata("json", true)).await;
    let list: Value = serde_json::from_slice(&got).unwrap();
    assert!(
        list["items"].as_array().unwrap().iter().all(labelled),
        "list: {list:#}"
    );
    let event = first_event(&client, OLD, &metadata("json", false)).await;
    let event: Value = serde_json::from_slice(&event).unwrap();
    assert_eq!(event["object"]["kind"], "PartialObjectMetadata");
    assert!(labelled(&event["object"]), "watch: {event:#}");

    // Metadata only, protobuf: the label is in the encoded object.
    let has_label = |b: &[u8]| b.windows(12).any(|w| w == b"converted-by");
    let (code, got) = send(
        &client,
        "GET",
        &format!("{OLD}/w1"),
        None,
        &metadata("vnd.kubernetes.protobuf", false),
    )
    .await;
    assert_eq!(code, 200);
    assert!(got.starts_with(b"k8s\0") && has_label(&got), "get: {got:?}");
    let (_, got) = send(
        &client,
        "GET",
        OLD,
        None,
        &metadata("vnd.kubernetes.protobuf", true),
    )
    .await;
    assert!(
        got.starts_with(b"k8s\0") && has_label(&got),
        "list: {got:?}"
    );
    let event = first_event(&client, OLD, &metadata("vnd.kubernetes.protobuf", false)).await;
    assert!(has_label(&event), "watch: {event:?}");

    // Each review carried one object, a list's too (conv-list-old-version.txt).
    let reviews = srv.taken();
    assert!(!reviews.is_empty());
    for (_, review) in &reviews {
        assert_eq!(
            review["request"]["objects"].as_array().unwrap().len(),
            1,
            "{review:#}"
        );
    }
    send(&client, "GET", OLD, None, "").await;
    assert_eq!(
        srv.taken().len(),
        2,
        "a list of two Widgets makes two reviews"
    );
}

/// A CRD that asks for `v1beta1` reviews gets them; the answer's uid is not checked (upstream
/// skips that check in `v1beta1`), and an answer of the other version is the decoder's
/// "unknown conversion", both ways round.
#[tokio::test]
async fn v1beta1_conversion_reviews_are_sent_and_read_as_upstream_reads_them() {
    let (env, srv) = widgets("/beta", &["v1beta1"]).await;
    let client = env.client();
    let (code, got) = send(&client, "GET", &format!("{OLD}/w1"), None, "").await;
    let w1: Value = serde_json::from_slice(&got).unwrap();
    assert_eq!(code, 200, "{w1:#}");
    assert_eq!(w1["apiVersion"], "wh.example.com/v1alpha1");
    assert_eq!(w1["spec"], json!({"size": 3}));
    let reviews = srv.taken();
    assert_eq!(reviews.len(), 1);
    assert_eq!(reviews[0].1["apiVersion"], "apiextensions.k8s.io/v1beta1");
    assert_eq!(
        reviews[0].1["request"]["desiredAPIVersion"],
        "wh.example.com/v1alpha1"
    );

    for (path, versions, answered, asked) in [
        ("/beta-as-v1", json!(["v1beta1"]), "v1", "v1beta1"),
        ("/v1-as-beta", json!(["v1"]), "v1beta1", "v1"),
    ] {
        let patch = json!({"spec": {"conversion": {"webhook": {
            "clientConfig": {"url": srv.url(path)}, "conversionReviewVersions": versions}}}});
        let crd = format!("{CRDS}/widgets.wh.example.com");
        let req = http::Request::patch(&crd)
            .header("content-type", "application/merge-patch+json")
            .body(kube::client::Body::from(patch.to_string().into_bytes()))
            .unwrap();
        assert_eq!(client.send(req).await.unwrap().status(), 200);
        let (code, got) = send(&client, "GET", &format!("{OLD}/w1"), None, "").await;
        let status: Value = serde_json::from_slice(&got).unwrap();
        assert_eq!(code, 500, "{status:#}");
        assert_eq!(
            status["message"],
            format!(
                "conversion webhook for wh.example.com/v1, Kind=Widget failed: converting ({answered}.ConversionReview) to ({asked}.ConversionReview): unknown conversion"
            )
        );
        assert_eq!(
            srv.taken()[0].1["apiVersion"],
            format!("apiextensions.k8s.io/{asked}")
        );
    }
}

/// A webhook that dribbles its body forever costs its `timeoutSeconds` and no more, and the
/// server answers other requests meanwhile; one whose header block never ends is cut off at Go's
/// 10 MiB bound, long before its timeout.
#[tokio::test]
async fn a_hostile_webhook_costs_at_most_its_timeout() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let srv = server(Arc::new(|path, _| match path {
        "/dribble" => Reply::Dribble,
        _ => Reply::EndlessHead,
    }))
    .await;
    for (name, path, timeout) in [
        ("dribble.example.com", "/dribble", 2),
        ("head.example.com", "/head", 10),
    ] {
        let label = name.split('.').next().unwrap();
        let extra = json!({"timeoutSeconds": timeout, "objectSelector": {"matchLabels": {"hostile": label}}});
        let (at, body) = configuration(
            "Validating",
            name,
            &srv.url(path),
            &srv.ca_bundle,
            rules("configmaps", &["CREATE"]),
            extra,
        );
        create(&client, &at, body).await;
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = |label: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": label, "labels": {"hostile": label}}}))
            .unwrap()
    };

    let started = Instant::now();
    let slow = {
        let api = api.clone();
        let cm = cm("dribble");
        tokio::spawn(async move { api.create(&PostParams::default(), &cm).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other = Instant::now();
    let (code, _) = send(&client, "GET", "/api/v1/namespaces/default", None, "").await;
    assert_eq!(code, 200);
    assert!(
        other.elapsed() < Duration::from_secs(1),
        "another request waited {:?}",
        other.elapsed()
    );
    let err = slow.await.unwrap().unwrap_err();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "took {took:?}"
    );
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 500);
    // The deadline struck while the body was read: client-go's body-read error.
    assert_eq!(
        status.message,
        "Internal error occurred: failed calling webhook \"dribble.example.com\": failed to call webhook: unexpected error when reading response body. Please retry. Original error: context deadline exceeded"
    );

    let started = Instant::now();
    let err = api
        .create(&PostParams::default(), &cm("head"))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    let url = srv.url("/head?timeout=10s");
    assert_eq!(
        status.message,
        format!(
            "Internal error occurred: failed calling webhook \"head.example.com\": failed to call webhook: Post \"{url}\": net/http: server response headers exceeded 10485760 bytes; aborted"
        )
    );
}
