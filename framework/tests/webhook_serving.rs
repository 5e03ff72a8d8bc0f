//! The webhook server end to end over real HTTPS on loopback, fed the very reviews
//! kube-apiserver v1.23 sent in the captures (`webhook_golden/`, copied from
//! `upstream/apiserver-responses/webhooks/`): a validator, a defaulter and a hub-and-spoke
//! conversion answer as the captured webhook did; the failure paths (a panicking handler, a
//! slow one, a bad body, an object that does not decode, an unknown path) answer what the server
//! needs and the process keeps serving; a manager serves its webhooks while another replica
//! holds the Lease, and on shutdown fails `/readyz` while it answers the reviews in flight; and a
//! managed configuration that sends a typed webhook another kind stops start-up.

mod support;

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use controller_manager::manager::{Manager, ManagerConfig};
use controller_manager::serving::{
    Certificates, SelfSignedPair, Server, SocketSharing, Tls, TlsSettings,
};
use controller_manager::webhook::{
    Defaulter, HubAndSpoke, Operation, Review, Validator, Verdict, WebhookInitializer,
    WebhookMetrics, WebhookServer, WebhookServing, Webhooks, layers,
};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::conversion::{ConversionRequest, ConversionResponse};
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

// ---- the captured webhook's kinds: Widget v1 (`spec.replicas`, the hub) and v1alpha1 (`spec.size`)

macro_rules! widget {
    ($name:ident, $spec:ident, $version:literal, $api_version:literal, $field:ident) => {
        #[derive(Clone, Debug, Default, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct $name {
            api_version: String,
            kind: String,
            metadata: ObjectMeta,
            spec: $spec,
        }
        #[derive(Clone, Debug, Default, Serialize, Deserialize)]
        struct $spec {
            $field: i64,
        }
        impl k8s_openapi::Resource for $name {
            const API_VERSION: &'static str = $api_version;
            const GROUP: &'static str = "wh.example.com";
            const KIND: &'static str = "Widget";
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = "widgets";
            type Scope = k8s_openapi::NamespaceResourceScope;
        }
        impl k8s_openapi::Metadata for $name {
            type Ty = ObjectMeta;
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

widget!(WidgetV1, SpecV1, "v1", "wh.example.com/v1", replicas);
widget!(
    WidgetV1alpha1,
    SpecV1alpha1,
    "v1alpha1",
    "wh.example.com/v1alpha1",
    size
);

impl From<WidgetV1alpha1> for WidgetV1 {
    fn from(w: WidgetV1alpha1) -> Self {
        WidgetV1 {
            api_version: "wh.example.com/v1".into(),
            kind: w.kind,
            metadata: w.metadata,
            spec: SpecV1 {
                replicas: w.spec.size,
            },
        }
    }
}

impl TryFrom<WidgetV1> for WidgetV1alpha1 {
    type Error = String;
    fn try_from(w: WidgetV1) -> Result<Self, String> {
        if w.spec.replicas > 100 {
            return Err("size out of range".into());
        }
        Ok(WidgetV1alpha1 {
            api_version: "wh.example.com/v1alpha1".into(),
            kind: w.kind,
            metadata: w.metadata,
            spec: SpecV1alpha1 {
                size: w.spec.replicas,
            },
        })
    }
}

// ---- the handlers

/// Denies what the `deny-code` capture's webhook denied; checks that an UPDATE and a DELETE
/// carry the old object.
struct Rules;

impl Validator<ConfigMap> for Rules {
    async fn validate(&self, review: &Review<ConfigMap>) -> Verdict {
        let old = review.old_object.is_some();
        match review.operation {
            Operation::Update if !old => return Verdict::deny("UPDATE without oldObject"),
            Operation::Delete if !old || review.object.is_some() => {
                return Verdict::deny("DELETE must carry only oldObject");
            }
            _ => {}
        }
        let labelled = |cm: &ConfigMap| {
            cm.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("wh"))
                .cloned()
        };
        if review.object.as_ref().and_then(labelled).as_deref() == Some("deny-code") {
            return Verdict::deny("size must be even")
                .with_code(422)
                .with_reason("Invalid")
                .with_cause("data.size", "FieldValueInvalid", "must be even");
        }
        Verdict::allow()
    }
}

/// Adds what the `wh-mutating-patch` capture's webhook added.
struct Mark;

impl Defaulter<ConfigMap> for Mark {
    async fn default(&self, _: &Review<ConfigMap>, cm: &mut ConfigMap) -> Verdict {
        cm.metadata
            .labels
            .get_or_insert_default()
            .insert("mutated".into(), "yes".into());
        cm.metadata
            .annotations
            .get_or_insert_default()
            .insert("wh.example.com/by".into(), "mutate".into());
        Verdict::allow()
    }
}

fn panicking() -> impl tower::Service<
    AdmissionRequest<DynamicObject>,
    Response = AdmissionResponse,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send
+ Sync {
    tower::service_fn(|r: AdmissionRequest<DynamicObject>| async move {
        if r.name == "boom" {
            panic!("handler bug");
        }
        Ok::<_, Infallible>(AdmissionResponse::from(&r))
    })
}

fn slow() -> impl tower::Service<
    AdmissionRequest<DynamicObject>,
    Response = AdmissionResponse,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send
+ Sync {
    tower::service_fn(|r: AdmissionRequest<DynamicObject>| async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok::<_, Infallible>(AdmissionResponse::from(&r))
    })
}

/// A hand-written conversion that renames, as the `conv-webhook-renames` capture's webhook.
fn renaming() -> impl tower::Service<
    ConversionRequest,
    Response = ConversionResponse,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send
+ Sync {
    tower::service_fn(|mut r: ConversionRequest| async move {
        let desired = r.desired_api_version.clone();
        let objects: Vec<Value> = std::mem::take(&mut r.objects)
            .into_iter()
            .map(|mut o| {
                o["apiVersion"] = json!(desired);
                let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
                o["metadata"]["name"] = json!(format!("{name}-renamed"));
                o
            })
            .collect();
        Ok::<_, Infallible>(ConversionResponse::for_request(r).success(objects))
    })
}

fn webhooks() -> Webhooks<()> {
    Webhooks::new()
        .with(WebhookInitializer::validating::<ConfigMap, _, _, _>(
            "rules",
            "/validate",
            |_| async { Ok(Rules) },
        ))
        .with(WebhookInitializer::defaulting::<ConfigMap, _, _, _>(
            "mark",
            "/mutate",
            |_| async { Ok(Mark) },
        ))
        .with(WebhookInitializer::conversion(
            "widgets",
            "/convert",
            |_| async { Ok(HubAndSpoke::<WidgetV1>::new().spoke::<WidgetV1alpha1>()) },
        ))
        .with(WebhookInitializer::conversion(
            "renames",
            "/convert-rename",
            |_| async { Ok(renaming()) },
        ))
        .with(WebhookInitializer::raw("panics", "/panic", |_| async {
            Ok(panicking())
        }))
        .with(WebhookInitializer::raw("slow", "/slow", |_| async {
            Ok(slow())
        }))
        .with(WebhookInitializer::raw("second", "/second", |_| async {
            Ok(tower::service_fn(
                |r: AdmissionRequest<DynamicObject>| async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    Ok::<_, Infallible>(AdmissionResponse::from(&r))
                },
            ))
        }))
}

// ---- a server and a TLS client

struct Running {
    addr: SocketAddr,
    ca: CertificateDer<'static>,
    registry: Registry,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn pair() -> (SelfSignedPair, CertificateDer<'static>) {
    let pair = SelfSignedPair::generate().unwrap();
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
    let ca = chain[1].clone();
    (pair, ca)
}

/// Serves every webhook of [`webhooks`] behind the standard layers, with a 5 s handler timeout.
async fn serve() -> Running {
    let (pair, ca) = pair();
    let mut registry = Registry::default();
    let metrics = WebhookMetrics::new(&mut registry);
    let mut server = WebhookServer::new();
    for w in webhooks().iter() {
        let ctx = controller_manager::webhook::WebhookContext {
            name: w.name().into(),
            path: w.path().into(),
            client: unreachable_client(),
            factory: controller_manager::informer::SharedInformerFactory::new(unreachable_client()),
            shutdown: CancellationToken::new(),
            extra: Arc::new(()),
        };
        let endpoint = build(w, ctx).await;
        let route = layers::standard(
            w.name(),
            w.path(),
            &metrics,
            Duration::from_secs(5),
            endpoint,
        );
        server = server.route(w.path(), route).unwrap();
    }
    let certificates =
        Certificates::from_pem(pair.cert_pem.as_bytes(), pair.key_pem.as_bytes()).unwrap();
    let tls = Tls::new(certificates, &TlsSettings::default()).unwrap();
    let bound = Server::bind("127.0.0.1:0".parse().unwrap(), SocketSharing::default())
        .unwrap()
        .with_tls(tls);
    let addr = bound.local_addr();
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let task = tokio::spawn(async move { server.serve(bound, stop).await.unwrap() });
    Running {
        addr,
        ca,
        registry,
        shutdown,
        task,
    }
}

async fn build(
    w: &WebhookInitializer<()>,
    ctx: controller_manager::webhook::WebhookContext<()>,
) -> controller_manager::webhook::Endpoint {
    w.build(ctx).await.unwrap()
}

/// A client for a context that never talks to an API server.
fn unreachable_client() -> kube::Client {
    let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

/// POSTs `body` to `path` as kube-apiserver does; the status and body.
async fn post(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    path: &str,
    content_type: &str,
    body: String,
) -> (u16, String) {
    let mut roots = RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = http::Request::post(path)
        .header("host", "localhost")
        .header("content-type", content_type)
        .header("accept", "application/json, */*")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

impl Running {
    async fn review(&self, path: &str, body: &Value) -> (u16, String) {
        post(
            self.addr,
            &self.ca,
            path,
            "application/json",
            body.to_string(),
        )
        .await
    }

    async fn answer(&self, path: &str, body: &Value) -> Value {
        let (status, text) = self.review(path, body).await;
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    fn metrics(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .unwrap()
            .unwrap();
    }
}

// ---- the captures

/// One call of a capture: the path with its `?timeout=`, the review sent, the captured answer.
struct Call {
    path: String,
    sent: Value,
    answered: Value,
}

fn calls(file: &str) -> Vec<Call> {
    let path = format!(
        "{}/tests/webhook_golden/{file}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let mut calls = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("# call ") else {
            continue;
        };
        let target = rest
            .split("POST ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        let sent = block(&mut lines, "# answered");
        lines.next();
        let answered = block(&mut lines, "# call");
        calls.push(Call {
            path: target.to_string(),
            sent,
            answered,
        });
    }
    assert!(!calls.is_empty(), "{file}: no calls");
    calls
}

/// The JSON of the lines up to the next one starting with `stop`.
fn block<'a>(lines: &mut std::iter::Peekable<impl Iterator<Item = &'a str>>, stop: &str) -> Value {
    let mut json = String::new();
    while let Some(l) = lines.next_if(|l| !l.starts_with(stop)) {
        json.push_str(l);
        json.push('\n');
    }
    serde_json::from_str(&json).unwrap()
}

/// The captured call's path on our server: `/allow?timeout=5s` becomes `/validate?timeout=5s`.
fn to(call: &Call, path: &str) -> String {
    match call.path.split_once('?') {
        Some((_, query)) => format!("{path}?{query}"),
        None => path.to_string(),
    }
}

// ---- the tests

#[tokio::test]
async fn captured_admission_reviews_are_answered_as_the_server_expects() {
    let server = serve().await;
    for file in [
        "wh-validating-allow-create",
        "wh-validating-allow-update",
        "wh-validating-allow-delete",
        "wh-validating-v1beta1",
    ] {
        for call in calls(file) {
            let answer = server.answer(&to(&call, "/validate"), &call.sent).await;
            assert_eq!(
                answer["apiVersion"], call.sent["apiVersion"],
                "{file}: the review's version"
            );
            assert_eq!(answer["kind"], "AdmissionReview");
            assert_eq!(
                answer["response"]["uid"], call.sent["request"]["uid"],
                "{file}"
            );
            assert_eq!(answer["response"]["allowed"], true, "{file}: {answer}");
        }
    }
    // A denial with a code, a reason and causes: exactly the captured webhook's answer.
    for call in calls("wh-validating-deny-code") {
        let answer = server.answer(&to(&call, "/validate"), &call.sent).await;
        assert_eq!(answer, call.answered);
    }
    server.stop().await;
}

#[tokio::test]
async fn a_defaulter_answers_a_patch_that_does_what_the_captured_patch_did() {
    let server = serve().await;
    let call = calls("wh-mutating-patch").remove(0);
    let answer = server.answer(&to(&call, "/mutate"), &call.sent).await;
    let response = &answer["response"];
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    let decode = |patch: &Value| -> json_patch::Patch {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch.as_str().unwrap())
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    };
    let object = call.sent["request"]["object"].clone();
    let (mut ours, mut theirs) = (object.clone(), object.clone());
    json_patch::patch(&mut ours, &decode(&response["patch"])).unwrap();
    json_patch::patch(&mut theirs, &decode(&call.answered["response"]["patch"])).unwrap();
    assert_eq!(ours, theirs);

    // Already defaulted: no patch at all.
    let mut again = call.sent.clone();
    again["request"]["object"] = ours;
    let answer = server.answer(&to(&call, "/mutate"), &again).await;
    assert_eq!(answer["response"]["allowed"], true);
    assert!(answer["response"].get("patch").is_none(), "{answer}");
    assert!(answer["response"].get("patchType").is_none(), "{answer}");
    server.stop().await;
}

#[tokio::test]
async fn hub_and_spoke_converts_the_captured_reviews_as_the_captured_webhook_did() {
    let server = serve().await;
    for file in [
        "conv-get-old-version",
        "conv-list-old-version",
        "conv-create-old-version",
    ] {
        for call in calls(file) {
            let answer = server.answer(&to(&call, "/convert"), &call.sent).await;
            assert_eq!(
                answer["response"]["uid"], call.answered["response"]["uid"],
                "{file}"
            );
            assert_eq!(
                answer["response"]["result"],
                json!({"status": "Success"}),
                "{file}: {answer}"
            );
            assert_eq!(
                answer["response"]["convertedObjects"],
                call.answered["response"]["convertedObjects"],
                "{file}"
            );
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn a_conversion_that_renames_is_refused_in_the_servers_words_before_it_leaves() {
    let server = serve().await;
    let call = calls("conv-webhook-renames").remove(0);
    let answer = server
        .answer(&to(&call, "/convert-rename"), &call.sent)
        .await;
    assert_eq!(
        answer["response"]["result"]["status"], "Failure",
        "{answer}"
    );
    assert_eq!(
        answer["response"]["result"]["message"],
        "conversion webhook for wh.example.com/v1, Kind=Widget returned invalid object: must have the same name: w1 != w1-renamed"
    );
    // A conversion the spoke refuses fails the review, naming the object and the versions.
    let mut big = calls("conv-get-old-version").remove(0).sent;
    big["request"]["objects"][0]["spec"]["replicas"] = json!(1000);
    let answer = server.answer("/convert", &big).await;
    assert_eq!(
        answer["response"]["result"]["message"],
        "cannot convert \"w1\" from wh.example.com/v1 to wh.example.com/v1alpha1: size out of range"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_panicking_handler_answers_500_is_counted_and_the_next_review_is_served() {
    let server = serve().await;
    let mut call = calls("wh-validating-allow-create").remove(0).sent;
    call["request"]["name"] = json!("boom");
    let (status, body) = server.review("/panic?timeout=5s", &call).await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("panicked"), "{body}");
    call["request"]["name"] = json!("fine");
    let answer = server.answer("/panic?timeout=5s", &call).await;
    assert_eq!(answer["response"]["allowed"], true);
    let metrics = server.metrics();
    assert!(
        metrics.contains("controller_runtime_webhook_panics_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "controller_runtime_webhook_requests_total{webhook=\"/panic\",code=\"500\"} 1"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "controller_runtime_webhook_requests_total{webhook=\"/panic\",code=\"200\"} 1"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("controller_runtime_webhook_requests_in_flight{webhook=\"/panic\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("controller_runtime_webhook_latency_seconds_count{webhook=\"/panic\"} 2"),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_slow_handler_answers_500_before_the_servers_timeout() {
    let server = serve().await;
    let call = calls("wh-validating-allow-create").remove(0).sent;
    let started = Instant::now();
    let (status, body) = server.review("/slow?timeout=1s", &call).await;
    let took = started.elapsed();
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("no answer within"), "{body}");
    assert!(
        took < Duration::from_secs(1),
        "answered after {took:?}, past the server's timeout"
    );
    assert!(
        took >= Duration::from_millis(850),
        "gave up early: {took:?}"
    );
    // Without `?timeout=`, the handler timeout (5 s here) holds.
    let started = Instant::now();
    let (status, _) = server.review("/slow", &call).await;
    assert_eq!(status, 500);
    assert!(started.elapsed() >= Duration::from_secs(5));
    server.stop().await;
}

#[tokio::test]
async fn bad_bodies_unknown_paths_and_undecodable_objects_get_clear_answers() {
    let server = serve().await;
    let (status, body) = post(
        server.addr,
        &server.ca,
        "/validate",
        "application/json",
        "{not json".into(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body.starts_with("cannot decode the body as a AdmissionReview: "),
        "{body}"
    );
    let (status, body) = post(
        server.addr,
        &server.ca,
        "/validate",
        "text/plain",
        "{}".into(),
    )
    .await;
    assert_eq!(
        (status, body.trim()),
        (400, "contentType=text/plain, expected application/json")
    );
    let (status, body) = post(
        server.addr,
        &server.ca,
        "/nowhere",
        "application/json",
        "{}".into(),
    )
    .await;
    assert_eq!(
        (status, body.trim()),
        (404, "no webhook is served at /nowhere")
    );
    let (status, body) = server
        .review(
            "/validate",
            &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
        )
        .await;
    assert_eq!(
        (status, body.trim()),
        (400, "the AdmissionReview has no request")
    );

    // A ConfigMap whose data is not strings: denied with 400, naming the field.
    let mut call = calls("wh-validating-allow-create").remove(0).sent;
    call["request"]["object"]["data"] = json!({"k": 5});
    let answer = server.answer("/validate", &call).await;
    let status = &answer["response"]["status"];
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(status["code"], 400);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("cannot decode object: data.k: invalid type: integer `5`"),
        "{status}"
    );
    // A kind the handler does not review: denied with 400, naming both kinds.
    call["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Secret"});
    let answer = server.answer("/validate", &call).await;
    assert_eq!(
        answer["response"]["status"]["message"],
        "this webhook reviews v1, Kind=ConfigMap, not v1, Kind=Secret; check the rules of its webhook configuration"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_replica_that_does_not_hold_the_lease_serves_its_webhooks_and_drains_them_unready() {
    let env = kube_testenv::TestEnv::start().await.unwrap();
    let free = || {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let (admin, hooks) = (free(), free());
    let dir = std::env::temp_dir().join(format!("cm-webhook-certs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (pair, ca) = pair();
    std::fs::write(dir.join("tls.crt"), &pair.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &pair.key_pem).unwrap();

    // Another replica holds the Lease for the next hour: this one never leads.
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(env.client(), "kube-system");
    let held: k8s_openapi::api::coordination::v1::Lease = serde_json::from_value(json!({
        "metadata": {"name": "webhook-test", "namespace": "kube-system"},
        "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600,
                 "acquireTime": "2099-01-01T00:00:00.000000Z", "renewTime": "2099-01-01T00:00:00.000000Z"}
    }))
    .unwrap();
    leases.create(&Default::default(), &held).await.unwrap();

    let mut config = ManagerConfig::new("webhook-test");
    config.admin_addr = Some(admin);
    config.admin_tls = None;
    config.leader_election = Some(controller_manager::leader::LeaderElectionConfig::new(
        "kube-system",
        "webhook-test",
        "me",
    ));
    let mut serving = WebhookServing::from_cert_dir(hooks, &dir);
    serving.webhooks = vec!["*".into(), "-slow".into()];
    let manager = Manager::new(config, env.client(), ()).with_webhooks(webhooks(), Some(serving));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));

    let (_, body) = support::until(admin, "/readyz?verbose", |status, body| {
        status == 200 && body.contains("[+]webhook-server ok")
    })
    .await;
    assert!(body.contains("webhook-server"), "{body}");
    let call = calls("wh-validating-allow-create").remove(0);
    let (status, body) = post(
        hooks,
        &ca,
        &to(&call, "/validate"),
        "application/json",
        call.sent.to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = post(
        hooks,
        &ca,
        "/slow",
        "application/json",
        call.sent.to_string(),
    )
    .await;
    assert_eq!(status, 404, "--webhooks=-slow leaves it out");
    let (_, metrics) = support::until(admin, "/metrics", |s, _| s == 200).await;
    assert!(
        metrics.contains(
            "controller_runtime_webhook_requests_total{webhook=\"/validate\",code=\"200\"} 1"
        ),
        "{metrics}"
    );

    // Shutting down: a review in flight is still answered.
    let in_flight = tokio::spawn(async move {
        post(
            hooks,
            &ca,
            "/second?timeout=10s",
            "application/json",
            call.sent.to_string(),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.cancel();
    // `/readyz` fails, visibly, while that review is answered.
    let (status, body) = support::get(admin, "/readyz?verbose")
        .await
        .expect("the admin server answers while reviews drain");
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("[-]webhook-server failed"), "{body}");
    assert!(!in_flight.is_finished(), "the review is still in flight");
    let (status, body) = in_flight.await.unwrap();
    assert_eq!(status, 200, "{body}");
    tokio::time::timeout(WAIT, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // Then both servers are gone.
    assert!(tokio::net::TcpStream::connect(hooks).await.is_err());
    assert!(support::get(admin, "/readyz").await.is_none());
}

#[tokio::test]
async fn unknown_webhooks_and_missing_certificate_files_stop_start_up_with_clear_errors() {
    let env = kube_testenv::TestEnv::start().await.unwrap();
    let free = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let missing = std::env::temp_dir().join("cm-webhook-no-such-dir");
    let mut serving = WebhookServing::from_cert_dir(free, &missing);
    serving.webhooks = vec!["rules".into(), "-nope".into()];
    let manager = Manager::new(ManagerConfig::new("w"), env.client(), ())
        .with_webhooks(webhooks(), Some(serving.clone()));
    let err = manager.validate().unwrap_err().to_string();
    assert_eq!(
        err,
        "\"nope\" is not in the list of known webhooks; known webhooks: rules, mark, widgets, renames, panics, slow, second (use '*' for all, '-NAME' to disable one)"
    );

    serving.webhooks = vec!["rules".into()];
    let manager = Manager::new(ManagerConfig::new("w"), env.client(), ())
        .with_webhooks(webhooks(), Some(serving));
    let err = manager
        .run(CancellationToken::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&missing.join("tls.crt").display().to_string()),
        "{err}"
    );

    let twice = webhooks().with(WebhookInitializer::validating::<ConfigMap, _, _, _>(
        "other",
        "/validate",
        |_| async { Ok(Rules) },
    ));
    let manager =
        Manager::new(ManagerConfig::new("w"), env.client(), ()).with_webhooks(twice, None);
    assert_eq!(
        manager.validate().unwrap_err().to_string(),
        "webhooks \"rules\" and \"other\" are both served at /validate"
    );
}

/// Refuses a ConfigMap whose `data.k` another ConfigMap already has, from the shared cache.
struct UniqueK {
    configmaps: controller_manager::informer::Store<ConfigMap>,
}

impl Validator<ConfigMap> for UniqueK {
    async fn validate(&self, review: &Review<ConfigMap>) -> Verdict {
        let Some(cm) = &review.object else {
            return Verdict::allow();
        };
        let k = |cm: &ConfigMap| cm.data.as_ref().and_then(|d| d.get("k")).cloned();
        let Some(value) = k(cm) else {
            return Verdict::allow();
        };
        let taken = self.configmaps.list().into_iter().find(|other| {
            other.metadata.name.as_deref() != Some(review.name.as_str())
                && k(other).as_deref() == Some(value.as_str())
        });
        match taken {
            Some(other) => Verdict::deny(format!(
                "data.k {value} is already used by ConfigMap {}",
                other.metadata.name.clone().unwrap_or_default()
            ))
            .with_code(409),
            None => Verdict::allow(),
        }
    }
}

#[tokio::test]
async fn a_validator_reads_the_shared_informer_cache() {
    let env = kube_testenv::TestEnv::start().await.unwrap();
    let configmaps: kube::Api<ConfigMap> = kube::Api::namespaced(env.client(), "default");
    let taken: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "a", "namespace": "default"}, "data": {"k": "v1"}
    }))
    .unwrap();
    configmaps
        .create(&Default::default(), &taken)
        .await
        .unwrap();

    let free = || {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let (admin, hooks) = (free(), free());
    let dir = std::env::temp_dir().join(format!("cm-webhook-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (pair, ca) = pair();
    std::fs::write(dir.join("tls.crt"), &pair.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &pair.key_pem).unwrap();
    let unique = Webhooks::new().with(WebhookInitializer::validating::<ConfigMap, _, _, _>(
        "unique-k",
        "/unique",
        |ctx| async move {
            Ok(UniqueK {
                configmaps: ctx.factory.informer::<ConfigMap>().store(),
            })
        },
    ));
    let mut config = ManagerConfig::new("cache-test");
    config.admin_addr = Some(admin);
    config.admin_tls = None;
    let serving = WebhookServing::from_cert_dir(hooks, &dir);
    let manager = Manager::new(config, env.client(), ()).with_webhooks(unique, Some(serving));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));
    support::until(admin, "/readyz?verbose", |status, body| {
        status == 200 && body.contains("[+]webhook-server ok")
    })
    .await;

    let mut review = calls("wh-validating-allow-create").remove(0).sent;
    review["request"]["name"] = json!("b");
    review["request"]["object"]["metadata"]["name"] = json!("b");
    review["request"]["object"]["data"] = json!({"k": "v1"});
    let (status, body) = post(
        hooks,
        &ca,
        "/unique",
        "application/json",
        review.to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(
        answer["response"]["status"]["message"],
        "data.k v1 is already used by ConfigMap a"
    );
    review["request"]["object"]["data"] = json!({"k": "v2"});
    let (_, body) = post(
        hooks,
        &ca,
        "/unique",
        "application/json",
        review.to_string(),
    )
    .await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    support::shut_down(&stop, run, WAIT).await;
}

/// A managed webhook configuration that sends a typed webhook another kind than its Rust type
/// stops start-up, naming the webhook, the configuration and the kinds; the manager never
/// serves a webhook that would refuse every review it gets.
#[tokio::test]
async fn a_configuration_sending_a_typed_webhook_another_kind_stops_start_up() {
    let env = kube_testenv::TestEnv::start().await.unwrap();
    let hooks = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let configs: kube::Api<DynamicObject> = kube::Api::all_with(
        env.client(),
        &kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingWebhookConfiguration",
            ),
            "validatingwebhookconfigurations",
        ),
    );
    let config: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "hooks"},
        "webhooks": [{
            "name": "rules.example.com",
            "clientConfig": {"url": format!("https://localhost:{}/validate", hooks.port())},
            "rules": [{"operations": ["CREATE"], "apiGroups": ["apps"],
                       "apiVersions": ["v1"], "resources": ["deployments"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"]
        }]
    }))
    .unwrap();
    configs.create(&Default::default(), &config).await.unwrap();
    let certs = controller_manager::certs::SelfManagedCerts::new(
        "kube-system",
        "webhook-certs",
        vec!["localhost".into()],
    )
    .managing(vec![
        "ValidatingWebhookConfiguration/hooks".parse().unwrap(),
    ]);
    let mut serving = WebhookServing::self_managed(hooks, certs);
    serving.webhooks = vec!["rules".into()];
    let manager = Manager::new(ManagerConfig::new("w"), env.client(), ())
        .with_webhooks(webhooks(), Some(serving));
    let error = tokio::time::timeout(WAIT, manager.run(CancellationToken::new()))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        error.to_string().contains(
            "webhook \"rules\" decodes ConfigMap (v1 configmaps), but ValidatingWebhookConfiguration \"hooks\" (its webhook \"rules.example.com\" calls /validate) also sends it apps/v1 deployments: narrow the rules to v1 configmaps or register a webhook for those types"
        ),
        "{error}"
    );
    assert!(
        tokio::net::TcpStream::connect(hooks).await.is_err(),
        "nothing is served"
    );
}
