//! Issue 33's "failover and rotation" run, with two real `metal-ccm` processes serving the
//! `AddressPool` overlap webhook with self-managed certificates, called by kube-testenv through a
//! Service whose EndpointSlices list both replicas (kube-testenv picks a random ready endpoint per
//! call, as kube-apiserver does), `failurePolicy: Fail`, 20 reviews a second: a forced CA
//! rotation, then a forced serving-certificate renewal, then `kill -9` of the leader, and no
//! review fails.
//!
//! The leader's endpoint is marked not ready just before it is killed, as the EndpointSlice
//! controller does once the kubelet sees the pod die: kube-apiserver does not retry a review
//! whose connection is refused, so a review sent to a dead endpoint fails there too, whatever the
//! webhook's framework does. What the kill tests is that the other replica keeps answering
//! through the leader's death and its own election.

use std::time::Duration;

use controller_manager::testing::{ManagerProcess, TestEnv};
use embedding_examples::address_pool::{self, AddressPool};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

const NS: &str = "kube-system";
const SERVICE: &str = "metal-ccm-webhook";
const SECRET: &str = "metal-ccm-webhook-certs";
const LEASE: &str = "metal-ccm";
const INVENTORY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/inventory.example.yaml");
const WAIT: Duration = Duration::from_secs(60);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn create(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
    plural: &str,
    body: serde_json::Value,
) {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
    let object: DynamicObject = serde_json::from_value(body).unwrap();
    let api: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// The CRD, the webhook's Service and its `ValidatingWebhookConfiguration`, as
/// docs/deploy/ has them.
async fn install(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &address_pool::crd().unwrap())
        .await
        .unwrap();
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": SERVICE, "namespace": NS},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 10260}]}
    }))
    .unwrap();
    Api::<Service>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let webhook = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "addresspools"},
        "webhooks": [{"name": "overlap.metal.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "failurePolicy": "Fail", "timeoutSeconds": 5,
            "clientConfig": {"service": {"name": SERVICE, "namespace": NS,
                "path": "/validate-addresspool", "port": 443}},
            "rules": [{"apiGroups": ["metal.example.com"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["addresspools"]}]}]
    });
    create(
        client,
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        webhook,
    )
    .await;
}

/// The EndpointSlice of one replica, listening on `port`.
fn slice(name: &str, port: u16, ready: bool) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS,
            "labels": {"kubernetes.io/service-name": SERVICE}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": ready}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}]
    }))
    .unwrap()
}

fn replica(env: &TestEnv, port: u16) -> ManagerProcess {
    let args = [
        "--cloud-provider=static-inventory".to_string(),
        format!("--cloud-config={INVENTORY}"),
        "--controllers=*,-route,address-pool".to_string(),
        "--secure-port=0".to_string(),
        "--feature-gates=CloudControllerManagerWebhook=true".to_string(),
        "--webhooks=address-pool-overlap".to_string(),
        "--webhook-bind-address=127.0.0.1".to_string(),
        format!("--webhook-secure-port={port}"),
        format!("--webhook-self-managed-certs={NS}/{SECRET}"),
        format!("--webhook-cert-hosts={SERVICE}.{NS}.svc"),
        "--webhook-managed-configurations=ValidatingWebhookConfiguration/addresspools".to_string(),
        "--leader-elect=true".to_string(),
        format!("--leader-elect-resource-name={LEASE}"),
        "--leader-elect-lease-duration=4s".to_string(),
        "--leader-elect-renew-deadline=3s".to_string(),
        "--leader-elect-retry-period=1s".to_string(),
    ];
    ManagerProcess::start(env!("CARGO_BIN_EXE_metal-ccm"), env, args)
        .unwrap()
        .with_timeout(WAIT)
}

/// Waits until something listens on `port`.
async fn listening(process: &mut ManagerProcess, port: u16) {
    process
        .until("the webhook port is open", async {
            while tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .unwrap();
}

fn pool(name: &str, start: &str, end: &str) -> AddressPool {
    serde_json::from_value(json!({
        "apiVersion": "metal.example.com/v1", "kind": "AddressPool",
        "metadata": {"name": name},
        "spec": {"ranges": [{"start": start, "end": end}], "assignment": "Automatic"},
    }))
    .unwrap()
}

/// 20 dry-run creates a second, each reviewed by the webhook, until `stop`; the errors.
fn reviews(
    client: &kube::Client,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    let pools: Api<AddressPool> = Api::all(client.clone());
    tokio::spawn(async move {
        let mut sent = JoinSet::new();
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        let mut n = 0usize;
        while !stop.is_cancelled() {
            tick.tick().await;
            n += 1;
            let (pools, last) = (pools.clone(), n % 250);
            sent.spawn(async move {
                let ip = format!("203.0.113.{last}");
                let probe = pool(&format!("probe-{n}"), &ip, &ip);
                let dry_run = PostParams {
                    dry_run: true,
                    ..PostParams::default()
                };
                pools
                    .create(&dry_run, &probe)
                    .await
                    .map(|_| ())
                    .map_err(|e| format!("review {n}: {e}"))
            });
        }
        let errors = sent
            .join_all()
            .await
            .into_iter()
            .filter_map(Result::err)
            .collect();
        (n, errors)
    })
}

fn rotation_state(secret: &Secret) -> (String, String, usize, bool) {
    let data = secret.data.clone().unwrap_or_default();
    let text = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
    let cas = text("ca-bundle.crt").matches("BEGIN CERTIFICATE").count();
    let asked = secret
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("controller-manager.io/rotate"));
    (text("ca.crt"), text("tls.crt"), cas, asked)
}

async fn rotate(secrets: &Api<Secret>, value: &str) {
    let patch = json!({"metadata": {"annotations": {"controller-manager.io/rotate": value}}});
    secrets
        .patch(SECRET, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    let lease = leases.get_opt(LEASE).await.ok()??;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

#[tokio::test]
async fn no_review_fails_through_ca_rotation_renewal_and_the_leaders_kill() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client).await;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);

    let (port_a, port_b) = (free_port(), free_port());
    let mut a = replica(&env, port_a);
    let leader = a
        .until("a leads", async {
            loop {
                if let Some(h) = holder(&leases).await {
                    return h;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .unwrap();
    listening(&mut a, port_a).await;
    slices
        .create(&PostParams::default(), &slice("replica-a", port_a, true))
        .await
        .unwrap();
    let mut b = replica(&env, port_b);
    listening(&mut b, port_b).await;
    slices
        .create(&PostParams::default(), &slice("replica-b", port_b, true))
        .await
        .unwrap();
    let pools: Api<AddressPool> = Api::all(client.clone());
    pools
        .create(
            &PostParams::default(),
            &pool("blue", "192.0.2.0", "192.0.2.3"),
        )
        .await
        .expect("the webhook answers");

    let stop = CancellationToken::new();
    let flow = reviews(&client, stop.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;

    // A forced CA rotation: its four steps, under load.
    let (old_ca, _, _, _) = rotation_state(&secrets.get(SECRET).await.unwrap());
    rotate(&secrets, "ca").await;
    b.until("the CA rotation finishes", async {
        loop {
            let (ca, _, cas, asked) = rotation_state(&secrets.get(SECRET).await.unwrap());
            if ca != old_ca && cas == 1 && !asked {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .unwrap();

    // A forced serving-certificate renewal, served by both replicas within a resync.
    let (_, old_serving, _, _) = rotation_state(&secrets.get(SECRET).await.unwrap());
    rotate(&secrets, "now").await;
    b.until("the serving certificate is renewed", async {
        loop {
            let (_, serving, _, _) = rotation_state(&secrets.get(SECRET).await.unwrap());
            if serving != old_serving {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;

    // kill -9 the leader; the other replica answers throughout and takes over.
    slices
        .replace(
            "replica-a",
            &PostParams::default(),
            &EndpointSlice {
                metadata: slices.get("replica-a").await.unwrap().metadata,
                ..slice("replica-a", port_a, false)
            },
        )
        .await
        .unwrap();
    // Reviews that picked `a` just before its endpoint went not ready are let finish: one still
    // in flight at SIGKILL fails on a real server too (upstream does not retry it), so the kill
    // tests the failover, not an in-flight call (seen once: 1 of 550 without this wait).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let killed = a.kill().await;
    assert!(!killed.is_clean(), "{killed:?}");
    b.until("b takes the lead", async {
        loop {
            match holder(&leases).await {
                Some(h) if h != leader => return,
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    let (sent, errors) = flow.await.unwrap();
    assert!(
        errors.is_empty(),
        "{} of {sent} reviews failed: {errors:#?}",
        errors.len()
    );
    assert!(sent >= 200, "only {sent} reviews");

    let overlap = pools
        .create(
            &PostParams::default(),
            &pool("teal", "192.0.2.2", "192.0.2.9"),
        )
        .await
        .unwrap_err();
    assert!(overlap.to_string().contains("blue"), "{overlap}");
    b.stop().await.unwrap();
}
