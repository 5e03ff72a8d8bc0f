//! Issue 33's "done when", on kube-testenv: the stock `metal-ccm` binary, two replicas (real
//! processes sharing one `--webhook-url` port with `--permit-port-sharing`, as two replicas
//! behind one address), self-managed certificates and URL-mode configurations, with the
//! manifests of `docs/deploy/` applied by kubectl as shipped. With no other component:
//! the `caBundle` and the URL land in both webhook configurations and the CRD's conversion
//! stanza, an overlapping pool is refused by `kubectl apply` with the webhook's message,
//! defaults are applied, and a pool written as `v1alpha1` reads back as `v1` and the other way.

mod support;

use std::net::TcpListener;
use std::time::Duration;

use controller_manager::testing::{ManagerProcess, TestEnv};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;
use support::{Kubectl, deploy};

const INVENTORY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/inventory.example.yaml");
const MANAGED: &str = "MutatingWebhookConfiguration/metal-ccm-addresspools,ValidatingWebhookConfiguration/metal-ccm-addresspools,CustomResourceDefinition/addresspools.metal.example.com";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `clientConfig`s of a managed object, as the API server holds them.
async fn client_configs(client: &kube::Client, kind: &str, plural: &str, name: &str) -> Vec<Value> {
    let group = match kind {
        "CustomResourceDefinition" => "apiextensions.k8s.io",
        _ => "admissionregistration.k8s.io",
    };
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let object = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
    match kind {
        "CustomResourceDefinition" => {
            vec![object["spec"]["conversion"]["webhook"]["clientConfig"].clone()]
        }
        _ => object["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["clientConfig"].clone())
            .collect(),
    }
}

const BLUE: &str = "apiVersion: metal.example.com/v1\nkind: AddressPool\nmetadata: {name: blue}\nspec:\n  ranges: [{start: 192.0.2.0, end: 192.0.2.15}]\n";
const RED: &str = "apiVersion: metal.example.com/v1\nkind: AddressPool\nmetadata: {name: red}\nspec:\n  ranges: [{start: 192.0.2.8, end: 192.0.2.20}]\n";
const GREEN: &str = "apiVersion: metal.example.com/v1alpha1\nkind: AddressPool\nmetadata: {name: green}\nspec:\n  addresses: [198.51.100.0/29]\n  autoAssign: false\n";

#[tokio::test]
async fn two_replicas_with_self_managed_certificates_serve_the_address_pool_webhooks() {
    let env = TestEnv::start().await.unwrap();
    let Some(kubectl) = Kubectl::new(&env, "metal-ccm-webhooks") else {
        return;
    };
    let crd = deploy("addresspool-crd.yaml").display().to_string();
    let hooks = deploy("addresspool-webhooks.yaml").display().to_string();
    kubectl.run(&["apply", "-f", &crd, "-f", &hooks]).await;

    let port = free_port();
    let url = format!("https://127.0.0.1:{port}");
    let args = [
        "--cloud-provider=static-inventory".to_string(),
        format!("--cloud-config={INVENTORY}"),
        "--controllers=*,-route,address-pool".to_string(),
        "--secure-port=0".to_string(),
        "--leader-elect=true".to_string(),
        "--feature-gates=CloudControllerManagerWebhook=true".to_string(),
        "--webhooks=*".to_string(),
        "--webhook-bind-address=127.0.0.1".to_string(),
        format!("--webhook-secure-port={port}"),
        "--permit-port-sharing=true".to_string(),
        "--webhook-self-managed-certs=kube-system/metal-ccm-webhook-certs".to_string(),
        "--webhook-cert-hosts=127.0.0.1".to_string(),
        format!("--webhook-managed-configurations={MANAGED}"),
        format!("--webhook-url={url}"),
    ];
    let exe = env!("CARGO_BIN_EXE_metal-ccm");
    let mut first = ManagerProcess::start(exe, &env, &args).unwrap();
    let mut second = ManagerProcess::start(exe, &env, &args).unwrap();

    // The caBundle (the shared Secret's bundle) and the URL, each path kept, everywhere.
    let client = env.client();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let objects = [
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            "metal-ccm-addresspools",
            "/default-addresspool",
        ),
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            "metal-ccm-addresspools",
            "/validate-addresspool",
        ),
        (
            "CustomResourceDefinition",
            "customresourcedefinitions",
            "addresspools.metal.example.com",
            "/convert-addresspool",
        ),
    ];
    let in_place = async || loop {
        let secret = secrets.get_opt("metal-ccm-webhook-certs").await.unwrap();
        let bundle = secret.and_then(|s| s.data?.get("ca-bundle.crt").cloned());
        if let Some(bundle) = bundle {
            let encoded = serde_json::to_value(&bundle).unwrap(); // base64, as the API writes it
            let mut all = true;
            for (kind, plural, name, path) in objects {
                for config in client_configs(&client, kind, plural, name).await {
                    all &= config["caBundle"] == encoded
                        && config["url"] == format!("{url}{path}").as_str()
                        && config.get("service").is_none();
                }
            }
            if all {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    first
        .until("caBundle and URL in every managed object", in_place())
        .await
        .unwrap();

    // Defaults applied.
    kubectl
        .try_run(&["apply", "-f", "-"], Some(BLUE))
        .await
        .unwrap();
    let assignment = kubectl
        .run(&[
            "get",
            "addresspools.v1.metal.example.com",
            "blue",
            "-o",
            "jsonpath={.spec.assignment}",
        ])
        .await;
    assert_eq!(assignment, "Automatic");

    // An overlapping pool refused by kubectl apply with the webhook's message. Each replica
    // judges by its own cache: a server-side dry run says when the replicas hold blue.
    let refused = async || loop {
        let dry = kubectl
            .try_run(&["apply", "--dry-run=server", "-f", "-"], Some(RED))
            .await;
        if dry.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    second
        .until("the caches hold blue", refused())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stderr = kubectl
        .try_run(&["apply", "-f", "-"], Some(RED))
        .await
        .unwrap_err();
    assert!(
        stderr.contains("admission webhook \"address-pool-overlap.metal.example.com\" denied the request: spec.ranges[0] (192.0.2.8-192.0.2.20) overlaps AddressPool \"blue\" (192.0.2.0-192.0.2.15): two pools may not hand out the same address"),
        "{stderr}"
    );

    // v1alpha1 ⇄ v1.
    kubectl
        .try_run(&["apply", "-f", "-"], Some(GREEN))
        .await
        .unwrap();
    let ranges = kubectl
        .run(&[
            "get",
            "addresspools.v1.metal.example.com",
            "green",
            "-o",
            "jsonpath={.spec.ranges[0].start}-{.spec.ranges[0].end} {.spec.assignment}",
        ])
        .await;
    assert_eq!(ranges, "198.51.100.0-198.51.100.7 Manual");
    let addresses = kubectl
        .run(&[
            "get",
            "addresspools.v1alpha1.metal.example.com",
            "blue",
            "-o",
            "jsonpath={.spec.addresses} {.spec.autoAssign}",
        ])
        .await;
    assert_eq!(addresses, "[\"192.0.2.0/28\"] true");

    first.stop().await.unwrap();
    second.stop().await.unwrap();
}
