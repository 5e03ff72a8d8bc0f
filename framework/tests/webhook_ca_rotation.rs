//! Rotating the self-managed CA against kube-testenv, with several replicas in one process: each
//! of the four steps waits for its gate (the configurations hold the two-CA bundle; every live
//! replica's Lease names the new certificate), replicas racing for a step write it once, a full
//! rotation across three serving replicas is four Secret states in order while no handshake made
//! with the configuration's bundle fails, and a dead replica's Lease holds the last step back
//! only until it expires; the RBAC of docs/deploy/metal-ccm.yaml is all a rotation needs.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use controller_manager::certs::{
    Managed, ROTATE_ANNOTATION, ROTATE_CA, SERVING_CERTIFICATE_ANNOTATION, SelfManagedCerts,
    fingerprint,
};
use controller_manager::serving::{Certificates, Server, SocketSharing, Tls, TlsSettings};
use futures::{StreamExt, TryStreamExt};
use http_body_util::Full;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::DynamicObject;
use kube::{Api, ResourceExt};
use kube_testenv::TestEnv;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_util::sync::CancellationToken;

const NS: &str = "kube-system";
const SECRET: &str = "webhook-certs";
const CONFIG: &str = "ValidatingWebhookConfiguration/rotation";
const WAIT: Duration = Duration::from_secs(30);

fn certs(identity: &str) -> SelfManagedCerts {
    let mut certs = SelfManagedCerts::new(NS, SECRET, vec!["localhost".to_string()])
        .managing(vec![CONFIG.parse().unwrap()]);
    certs.identity = identity.to_string();
    certs.resync = Duration::from_millis(100);
    certs.lease_renew = Duration::from_millis(200);
    certs.lease_duration = Duration::from_secs(3);
    certs
}

/// A configuration `name` whose webhook nobody calls (it matches no resource written here), so
/// only its `caBundle` matters.
async fn configuration_named(client: &kube::Client, name: &str) {
    let vwc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{"name": "rotation.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "failurePolicy": "Ignore",
            "clientConfig": {"url": "https://localhost:9443/validate"},
            "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["gadgets"]}]}]
    }))
    .unwrap();
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
        ),
        "validatingwebhookconfigurations",
    );
    Api::<DynamicObject>::all_with(client.clone(), &resource)
        .create(&PostParams::default(), &vwc)
        .await
        .unwrap();
}

/// The configuration's `caBundle`, PEM.
async fn configured_bundle(client: &kube::Client) -> String {
    let api: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(client.clone());
    let vwc = api.get("rotation").await.unwrap();
    let bundle = vwc.webhooks.unwrap()[0]
        .client_config
        .ca_bundle
        .clone()
        .unwrap_or_default();
    String::from_utf8(bundle.0).unwrap()
}

fn secrets(client: &kube::Client) -> Api<Secret> {
    Api::namespaced(client.clone(), NS)
}

async fn rotate(client: &kube::Client, value: &str) {
    let patch = json!({"metadata": {"annotations": {ROTATE_ANNOTATION: value}}});
    secrets(client)
        .patch(SECRET, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// A Secret's state in a CA rotation: how many CAs the bundle holds, and whether the serving
/// certificate is signed by the current CA.
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    cas: usize,
    serving_by_current_ca: bool,
    ca: String,
}

fn state(secret: &Secret) -> State {
    let data = secret.data.clone().unwrap();
    let text = |key: &str| String::from_utf8(data[key].0.clone()).unwrap();
    let ca = fingerprint(&text("ca.crt")).unwrap();
    let serving_ca = secret.annotations()["controller-manager.io/serving-ca"].clone();
    State {
        cas: CertificateDer::pem_slice_iter(text("ca-bundle.crt").as_bytes()).count(),
        serving_by_current_ca: serving_ca == ca,
        ca,
    }
}

/// Writes a Lease as a replica `identity` would, serving `fingerprint`, renewed at `renewed`.
async fn lease(client: &kube::Client, identity: &str, fingerprint: &str, renewed: Timestamp) {
    let api: Api<Lease> = Api::namespaced(client.clone(), NS);
    let name = format!("{SECRET}-serving-{identity}");
    let mut lease = api.get_opt(&name).await.unwrap().unwrap_or_default();
    lease.metadata = ObjectMeta {
        name: Some(name.clone()),
        annotations: Some(BTreeMap::from([(
            SERVING_CERTIFICATE_ANNOTATION.to_string(),
            fingerprint.to_string(),
        )])),
        resource_version: lease.metadata.resource_version,
        ..ObjectMeta::default()
    };
    lease.spec = Some(LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(3),
        renew_time: Some(MicroTime(renewed)),
        ..LeaseSpec::default()
    });
    if lease.metadata.resource_version.is_some() {
        api.replace(&name, &PostParams::default(), &lease)
            .await
            .unwrap();
    } else {
        api.create(&PostParams::default(), &lease).await.unwrap();
    }
}

#[tokio::test]
async fn each_step_waits_for_its_gate_and_racing_replicas_write_it_once() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    configuration_named(&client, "rotation").await;
    let (replica, b, c) = (certs("a"), certs("b"), certs("c"));
    let first = replica.ensure(&client).await.unwrap();
    let managed: Managed = CONFIG.parse().unwrap();
    managed.inject(&client, &first.ca_bundle).await.unwrap();
    let old_serving = fingerprint(&first.serving.cert_pem).unwrap();
    lease(&client, "b", &old_serving, Timestamp::now()).await;
    let before = state(&secrets(&client).get(SECRET).await.unwrap());
    assert_eq!((before.cas, before.serving_by_current_ca), (1, true));

    // Step 1, raced by three replicas: one writes it, all read the same.
    rotate(&client, ROTATE_CA).await;
    let (x, y, z) = tokio::join!(
        replica.ensure(&client),
        b.ensure(&client),
        c.ensure(&client)
    );
    let (x, y, z) = (x.unwrap(), y.unwrap(), z.unwrap());
    assert_eq!((&x, &y), (&z, &z));
    let step1 = secrets(&client).get(SECRET).await.unwrap();
    let one = state(&step1);
    assert_eq!((one.cas, one.serving_by_current_ca), (2, false));
    assert_ne!(one.ca, before.ca);
    assert!(!step1.annotations().contains_key(ROTATE_ANNOTATION));
    assert_eq!(
        x.serving, first.serving,
        "step 1 keeps the serving certificate"
    );

    // Step 2 waits until the configuration holds the two-CA bundle.
    assert_eq!(replica.ensure(&client).await.unwrap(), x);
    managed.inject(&client, &x.ca_bundle).await.unwrap();
    let (x, y) = tokio::join!(replica.ensure(&client), b.ensure(&client));
    let (step2, y) = (x.unwrap(), y.unwrap());
    assert_eq!(step2, y);
    assert_ne!(step2.serving, first.serving);
    assert_eq!(step2.ca_bundle, configured_bundle(&client).await);
    let two = state(&secrets(&client).get(SECRET).await.unwrap());
    assert_eq!((two.cas, two.serving_by_current_ca), (2, true));
    assert_eq!(two.ca, one.ca);

    // Step 4 waits until every live Lease names the new certificate.
    let new_serving = fingerprint(&step2.serving.cert_pem).unwrap();
    assert_eq!(
        replica.ensure(&client).await.unwrap(),
        step2,
        "b serves the old"
    );
    lease(&client, "b", &new_serving, Timestamp::now()).await;
    lease(&client, "c", "", Timestamp::now()).await;
    assert_eq!(
        replica.ensure(&client).await.unwrap(),
        step2,
        "c serves nothing yet"
    );
    let long_ago = Timestamp::now() - SignedDuration::from_secs(60);
    lease(&client, "c", &old_serving, long_ago).await;
    let step4 = replica.ensure(&client).await.unwrap();
    assert_eq!(step4.serving, step2.serving);
    let four = state(&secrets(&client).get(SECRET).await.unwrap());
    assert_eq!((four.cas, four.serving_by_current_ca), (1, true));
    assert_eq!(four.ca, one.ca, "the new CA stays");
    assert_eq!(
        fingerprint(&step4.ca_bundle).unwrap(),
        one.ca,
        "the old CA left the bundle"
    );
    assert_eq!(replica.ensure(&client).await.unwrap(), step4, "settled");
}

/// A replica: its certificate task and a TLS server answering 200, both stopped by `stop`.
struct Replica {
    addr: SocketAddr,
    stop: CancellationToken,
    keeper: JoinHandle<()>,
}

async fn replica(client: &kube::Client, certs: &SelfManagedCerts) -> Replica {
    let stop = CancellationToken::new();
    let (certificates, keeper): (Certificates, _) =
        certs.start(client.clone(), stop.clone()).await.unwrap();
    let tls = Tls::new(certificates, &TlsSettings::default()).unwrap();
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), SocketSharing::default())
        .unwrap()
        .with_tls(tls);
    let addr = server.local_addr();
    let answer = tower::service_fn(|_: http::Request<hyper::body::Incoming>| async {
        Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(b"ok"))))
    });
    tokio::spawn(server.serve(answer, stop.clone()));
    Replica { addr, stop, keeper }
}

/// A TLS handshake with `addr` trusting only `bundle`; the leaf served.
async fn handshake(addr: SocketAddr, bundle: &str) -> Result<Vec<u8>, String> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    Ok(tls.get_ref().1.peer_certificates().unwrap()[0].to_vec())
}

/// Every Secret state from now on, until `until` says stop.
fn watch_states(
    client: &kube::Client,
    from: String,
    until: impl Fn(&State) -> bool + Send + 'static,
) -> JoinHandle<Vec<State>> {
    let api = secrets(client);
    tokio::spawn(async move {
        let params = WatchParams::default().fields(&format!("metadata.name={SECRET}"));
        let mut events = api.watch(&params, &from).await.unwrap().boxed();
        let mut states = Vec::new();
        while let Some(event) = events.try_next().await.unwrap() {
            if let WatchEvent::Modified(secret) = event {
                let state = state(&secret);
                let done = until(&state);
                states.push(state);
                if done {
                    break;
                }
            }
        }
        states
    })
}

#[tokio::test]
async fn three_replicas_rotate_the_ca_in_three_writes_and_no_handshake_fails() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    configuration_named(&client, "rotation").await;
    let mut replicas = Vec::new();
    for identity in ["a", "b", "c"] {
        replicas.push(replica(&client, &certs(identity)).await);
    }
    let secret = secrets(&client).get(SECRET).await.unwrap();
    let before = state(&secret);
    let addrs: Vec<SocketAddr> = replicas.iter().map(|r| r.addr).collect();

    // Handshakes with every replica, trusting what the configuration holds at that moment, as
    // the API server does.
    let flowing = CancellationToken::new();
    let rounds = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let rounds_done = || rounds.load(std::sync::atomic::Ordering::SeqCst);
    let flow = {
        let (flowing, client, addrs) = (flowing.clone(), client.clone(), addrs.clone());
        let rounds = rounds.clone();
        tokio::spawn(async move {
            let mut leaves = Vec::new();
            while !flowing.is_cancelled() {
                let bundle = configured_bundle(&client).await;
                for addr in &addrs {
                    let leaf = handshake(*addr, &bundle).await;
                    let leaf = leaf.unwrap_or_else(|e| panic!("after {}: {e}", leaves.len()));
                    if leaves.last() != Some(&leaf) {
                        leaves.push(leaf);
                    }
                }
                rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            leaves
        })
    };
    let old = before.ca.clone();
    let states = watch_states(&client, secret.resource_version().unwrap(), move |s| {
        s.cas == 1 && s.ca != old
    });
    while rounds_done() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    rotate(&client, ROTATE_CA).await;
    let states = tokio::time::timeout(WAIT, states)
        .await
        .expect("the rotation never finishes")
        .unwrap();
    let finished = rounds_done();
    while rounds_done() < finished + 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    flowing.cancel();
    let leaves = flow.await.unwrap();
    let steps: Vec<(usize, bool)> = states
        .iter()
        .map(|s| (s.cas, s.serving_by_current_ca))
        .collect();
    assert_eq!(
        steps,
        [(1, true), (2, false), (2, true), (1, true)],
        "the annotation, then steps 1, 2 and 4, each written once"
    );
    assert!(
        leaves.len() >= 2,
        "the flow saw the old and new certificates"
    );

    let after = secrets(&client).get(SECRET).await.unwrap();
    let pem = after.data.unwrap()["tls.crt"].0.clone();
    let leaf = CertificateDer::from_pem_slice(&pem).unwrap();
    let bundle = configured_bundle(&client).await;
    assert_eq!(CertificateDer::pem_slice_iter(bundle.as_bytes()).count(), 1);
    for addr in &addrs {
        let served = handshake(*addr, &bundle).await.unwrap();
        assert_eq!(served, leaf.to_vec(), "every replica serves the new one");
    }
    for r in replicas {
        r.stop.cancel();
        r.keeper.await.unwrap();
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let left = leases.list(&Default::default()).await.unwrap().items.len();
    assert_eq!(left, 0, "replicas stopping delete their Leases");
}

#[tokio::test]
async fn a_dead_replicas_lease_holds_the_last_step_back_until_it_expires() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    configuration_named(&client, "rotation").await;
    let alive = replica(&client, &certs("alive")).await;
    let dead = replica(&client, &certs("dead")).await;
    // Killed: no shutdown, its Lease stays, naming the old certificate.
    dead.keeper.abort();
    dead.stop.cancel();
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let renewed = leases
        .get(&format!("{SECRET}-serving-dead"))
        .await
        .unwrap()
        .spec
        .unwrap()
        .renew_time
        .unwrap()
        .0;
    let expires = renewed + SignedDuration::from_secs(3);

    let secret = secrets(&client).get(SECRET).await.unwrap();
    let old = state(&secret).ca;
    let states = watch_states(&client, secret.resource_version().unwrap(), move |s| {
        s.cas == 1 && s.ca != old
    });
    rotate(&client, ROTATE_CA).await;
    let states = tokio::time::timeout(WAIT, states)
        .await
        .expect("the dead replica's Lease blocks the rotation forever")
        .unwrap();
    let finished = Timestamp::now();
    assert!(
        finished >= expires,
        "the old CA left at {finished}, before the dead Lease expired at {expires}"
    );
    assert_eq!(states.len(), 4, "{states:?}");
    alive.stop.cancel();
    alive.keeper.await.unwrap();
}

/// Creates every RBAC object of `docs/deploy/<file>` as the admin.
async fn apply_deploy_file(client: &kube::Client, file: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/deploy")
        .join(file);
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&std::fs::read_to_string(path).unwrap()).unwrap();
    for doc in docs {
        let object: DynamicObject = serde_json::from_value(doc).unwrap();
        let types = object.types.clone().unwrap();
        if !types.api_version.starts_with("rbac.authorization.k8s.io/") {
            continue;
        }
        let (group, version) = types.api_version.split_once('/').unwrap();
        let plural = format!("{}s", types.kind.to_lowercase());
        let resource = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(group, version, &types.kind),
            &plural,
        );
        let api: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.create(&PostParams::default(), &object).await.unwrap();
    }
}

#[tokio::test]
async fn the_shipped_rbac_is_all_a_rotation_needs() {
    let env = TestEnv::builder()
        .authorization(true)
        .start()
        .await
        .unwrap();
    let admin = env.client();
    let account: k8s_openapi::api::core::v1::ServiceAccount = serde_json::from_value(
        json!({"metadata": {"name": "cloud-controller-manager", "namespace": NS}}),
    )
    .unwrap();
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    apply_deploy_file(&admin, "metal-ccm.yaml").await;
    configuration_named(&admin, "metal-ccm-addresspools").await;

    let token = env
        .token_for_service_account(NS, "cloud-controller-manager")
        .unwrap();
    let yaml = kube_testenv::kubeconfig_yaml_with_token(&env.url(), &token);
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let account = kube::Client::try_from(config).unwrap();
    let secret = "metal-ccm-webhook-certs";
    let mine = |identity: &str| {
        let mut certs =
            SelfManagedCerts::new(NS, secret, vec!["localhost".to_string()]).managing(vec![
                "ValidatingWebhookConfiguration/metal-ccm-addresspools"
                    .parse()
                    .unwrap(),
            ]);
        certs.identity = identity.to_string();
        certs.resync = Duration::from_millis(100);
        certs
    };
    let stop = CancellationToken::new();
    let (_, a) = mine("a")
        .start(account.clone(), stop.clone())
        .await
        .unwrap();
    let (_, b) = mine("b")
        .start(account.clone(), stop.clone())
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let before = state(&secrets.get(secret).await.unwrap());
    let patch = json!({"metadata": {"annotations": {ROTATE_ANNOTATION: ROTATE_CA}}});
    secrets
        .patch(secret, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let now = state(&secrets.get(secret).await.unwrap());
        if now.cas == 1 && now.ca != before.ca {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "stuck at {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.cancel();
    a.await.unwrap();
    b.await.unwrap();
    let user = format!("system:serviceaccount:{NS}:cloud-controller-manager");
    let requests = controller_manager::testing::Requests::of(&env);
    let mine: Vec<_> = requests
        .records()
        .iter()
        .filter(|r| r.user == user)
        .collect();
    let refused: Vec<String> = mine
        .iter()
        .filter(|r| r.status == 401 || r.status == 403)
        .map(|r| format!("{} {} {:?}", r.verb, r.resource, r.name))
        .collect();
    assert!(refused.is_empty(), "refused: {refused:?}");
    let used: std::collections::BTreeSet<(String, String)> = mine
        .iter()
        .map(|r| (r.verb.clone(), r.resource.clone()))
        .collect();
    for (verb, resource) in [
        ("create", "secrets"),
        ("get", "secrets"),
        ("update", "secrets"),
        ("create", "leases"),
        ("get", "leases"),
        ("list", "leases"),
        ("update", "leases"),
        ("delete", "leases"),
        ("get", "validatingwebhookconfigurations"),
        ("patch", "validatingwebhookconfigurations"),
    ] {
        let pair = (verb.to_string(), resource.to_string());
        assert!(
            used.contains(&pair),
            "{verb} {resource} granted but never used"
        );
    }
}
