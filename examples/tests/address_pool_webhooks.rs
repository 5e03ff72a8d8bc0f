//! metal-ccm's `AddressPool` webhooks against kube-testenv, installed from the manifests a
//! cluster gets (`docs/deploy/addresspool-crd.yaml`, `docs/deploy/addresspool-webhooks.yaml`) by
//! `WebhookInstall`, as envtest installs them: a pool without an assignment mode gets
//! `Automatic`, an overlapping pool is refused with the webhook's message (in either version), a
//! pool written as `v1alpha1` reads back as `v1` and the other way round, and a `v1alpha1` pool
//! that cannot be converted is refused, saying which address.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use controller_manager::testing::{TestEnv, WebhookInstall};
use embedding_examples::address_pool::{self, AddressPool, Assignment, IpRange, v1alpha1};
use kube::api::{Api, PostParams};
use serde_json::json;
use support::deploy;

fn v1(name: &str, start: &str, end: &str) -> AddressPool {
    serde_json::from_value(json!({
        "apiVersion": "metal.example.com/v1", "kind": "AddressPool",
        "metadata": {"name": name},
        "spec": {"ranges": [{"start": start, "end": end}]},
    }))
    .unwrap()
}

fn alpha(name: &str, addresses: &[&str], auto_assign: bool) -> v1alpha1::AddressPool {
    serde_json::from_value(json!({
        "apiVersion": "metal.example.com/v1alpha1", "kind": "AddressPool",
        "metadata": {"name": name},
        "spec": {"addresses": addresses, "autoAssign": auto_assign},
    }))
    .unwrap()
}

fn range(start: &str, end: &str) -> IpRange {
    IpRange {
        start: start.into(),
        end: end.into(),
    }
}

/// The message and code of a refused write.
fn refusal(result: kube::Result<impl std::fmt::Debug>) -> (String, u16) {
    match result {
        Err(kube::Error::Api(status)) => (status.message, status.code),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn overlaps_are_refused_defaults_applied_and_both_versions_read_back() {
    let env = TestEnv::start().await.unwrap();
    let hooks = WebhookInstall::from_manifests(&[
        deploy("addresspool-crd.yaml"),
        deploy("addresspool-webhooks.yaml"),
    ])
    .webhooks(address_pool::webhooks())
    .start(&env)
    .await
    .unwrap();
    let pools: Api<AddressPool> = Api::all(env.client());
    let old: Api<v1alpha1::AddressPool> = Api::all(env.client());
    let pp = PostParams::default();

    // Defaulted by the mutating webhook.
    let blue = pools
        .create(&pp, &v1("blue", "192.0.2.0", "192.0.2.3"))
        .await
        .unwrap();
    assert_eq!(blue.spec.assignment, Some(Assignment::Automatic));

    // The overlap webhook judges by the cache: wait until it holds blue.
    let cached = hooks.informers().informer::<AddressPool>().store();
    let seen = async {
        while cached.get_by_name("blue").is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), seen)
        .await
        .unwrap();
    let red = pools
        .create(&pp, &v1("red", "192.0.2.2", "192.0.2.8"))
        .await;
    let overlap = "admission webhook \"address-pool-overlap.metal.example.com\" denied the request: spec.ranges[0] (192.0.2.2-192.0.2.8) overlaps AddressPool \"blue\" (192.0.2.0-192.0.2.3): two pools may not hand out the same address";
    assert_eq!(refusal(red), (overlap.to_string(), 403));
    // The same pool written as v1alpha1 is judged the same (the webhook gets it as v1).
    let red = old
        .create(&pp, &alpha("red", &["192.0.2.2-192.0.2.8"], true))
        .await;
    assert_eq!(refusal(red), (overlap.to_string(), 403));
    // Unreadable ranges are refused naming the field.
    let bad = pools
        .create(&pp, &v1("bad", "192.0.2.9", "192.0.2.1"))
        .await;
    assert_eq!(
        refusal(bad),
        (
            "admission webhook \"address-pool-overlap.metal.example.com\" denied the request: spec.ranges[0]: 192.0.2.9-192.0.2.1 ends before it starts".to_string(),
            403
        )
    );

    // Written as v1alpha1, read as v1 ...
    old.create(
        &pp,
        &alpha("green", &["198.51.100.0/30", "198.51.100.9"], false),
    )
    .await
    .unwrap();
    let green = pools.get("green").await.unwrap();
    assert_eq!(
        green.spec.ranges,
        [
            range("198.51.100.0", "198.51.100.3"),
            range("198.51.100.9", "198.51.100.9")
        ]
    );
    assert_eq!(green.spec.assignment, Some(Assignment::Manual));
    // ... and written as v1, read as v1alpha1, one by one and listed.
    let blue = old.get("blue").await.unwrap();
    assert_eq!(
        (blue.spec.addresses, blue.spec.auto_assign),
        (vec!["192.0.2.0/30".to_string()], true)
    );
    let listed = old.list(&Default::default()).await.unwrap();
    let addresses: Vec<(String, Vec<String>)> = listed
        .items
        .iter()
        .map(|p| (p.metadata.name.clone().unwrap(), p.spec.addresses.clone()))
        .collect();
    assert_eq!(
        addresses,
        [
            ("blue".to_string(), vec!["192.0.2.0/30".to_string()]),
            (
                "green".to_string(),
                vec!["198.51.100.0/30".to_string(), "198.51.100.9".to_string()]
            ),
        ]
    );

    // A v1alpha1 pool that cannot become v1 is refused by the conversion, naming the address.
    let (message, _) = refusal(
        old.create(&pp, &alpha("nope", &["192.0.2.100", "nope"], true))
            .await,
    );
    assert!(
        message.contains("cannot convert \"nope\" from metal.example.com/v1alpha1 to metal.example.com/v1: spec.addresses[1]: \"nope\" in \"nope\" is not an IP address"),
        "{message}"
    );
    assert!(old.get("nope").await.is_err(), "nothing stored");
    hooks.stop().await;
}

#[tokio::test]
async fn manifests_it_cannot_install_are_refused_naming_what_is_wrong() {
    let env = TestEnv::start().await.unwrap();
    let error = |paths: Vec<PathBuf>| {
        let env = &env;
        async move {
            WebhookInstall::from_manifests(&paths)
                .webhooks(address_pool::webhooks())
                .start(env)
                .await
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        }
    };
    let missing = error(vec![deploy("nope.yaml")]).await;
    assert!(
        missing.starts_with("cannot read ") && missing.contains("nope.yaml"),
        "{missing}"
    );
    let deployment = error(vec![deploy("deployment.yaml")]).await;
    assert!(
        deployment.ends_with("deployment.yaml: document 1 is a \"Deployment\"; WebhookInstall applies ValidatingWebhookConfigurations, MutatingWebhookConfigurations and CustomResourceDefinitions"),
        "{deployment}"
    );
    // A configuration calling a path nothing serves: the webhook map and the manifest disagree.
    let unserved = WebhookInstall::from_manifests(&[deploy("addresspool-webhooks.yaml")])
        .start(&env)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert_eq!(
        unserved,
        "MutatingWebhookConfiguration/metal-ccm-addresspools calls /default-addresspool, which no registered webhook serves (served: none): register the webhook or fix the manifest"
    );
}
