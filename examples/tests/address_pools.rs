//! The `address-pool` controller of `metal-ccm` against kube-testenv, with the CRD applied by
//! kubectl from `docs/deploy/`: LoadBalancer Services get addresses from two pools (one picked by
//! annotation), an overlapping third pool is refused with a condition and an Event, deleting a
//! Service releases its address, `kubectl get addresspools` shows the counts, and the pool
//! informer is shared like every other (one streaming list, a WATCH, for the process).

mod support;

use std::path::PathBuf;
use std::time::Duration;

use controller_manager::testing::{ManagerProcess, Requests, TestEnv};
use embedding_examples::address_pool::{self, AddressPool, POOL_ANNOTATION};
use k8s_openapi::api::core::v1::{Event, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use support::Kubectl;

fn crd_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/deploy/addresspool-crd.yaml")
}

const CRD_HEADER: &str = "# The AddressPool CRD of metal-ccm's address-pool controller, generated from\n# `embedding_examples::address_pool::crd()` (v1, the storage version, and v1alpha1, both\n# `#[derive(CustomResource)]`, converted by metal-ccm's address-pool-conversion webhook);\n# regenerate with `UPDATE_CRD=1 cargo test -p embedding-examples --test address_pools crd_yaml`.\n# `kubectl apply -f docs/deploy/addresspool-crd.yaml`, then start metal-ccm with\n# `--controllers=*,address-pool` (and its webhooks: docs/deploy/addresspool-webhooks.yaml).\n";

#[test]
fn crd_yaml_is_the_derived_crd() {
    let derived = address_pool::crd().unwrap();
    if std::env::var_os("UPDATE_CRD").is_some() {
        let yaml = serde_saphyr::to_string(&derived).unwrap();
        std::fs::write(crd_path(), format!("{CRD_HEADER}{yaml}")).unwrap();
    }
    let text = std::fs::read_to_string(crd_path()).unwrap();
    let written: CustomResourceDefinition = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(
        written, derived,
        "docs/deploy/addresspool-crd.yaml is stale: regenerate it (see its header)"
    );
}

const INVENTORY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/inventory.example.yaml");

async fn create<K>(api: &Api<K>, obj: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

fn load_balancer(name: &str, pool: Option<&str>) -> serde_json::Value {
    let annotations = pool.map(|p| json!({POOL_ANNOTATION: p}));
    json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    })
}

/// A `v1` pool: this test runs no webhook, so it writes the storage version, which needs no
/// conversion, and names the assignment mode, which no defaulting webhook fills in.
fn pool(name: &str, start: &str, end: &str, automatic: bool) -> serde_json::Value {
    let assignment = if automatic { "Automatic" } else { "Manual" };
    json!({
        "apiVersion": "metal.example.com/v1", "kind": "AddressPool",
        "metadata": {"name": name},
        "spec": {"ranges": [{"start": start, "end": end}], "assignment": assignment},
    })
}

fn has_ip(ip: &'static str) -> impl Fn(Option<&Service>) -> bool {
    move |svc| {
        let ingress = svc.and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.clone());
        ingress.is_some_and(|i| i.iter().any(|i| i.ip.as_deref() == Some(ip)))
    }
}

/// The pool's status shows these counts and this Ready status, judged at its current generation.
fn counts(allocated: u64, free: u64, ready: &'static str) -> impl Fn(Option<&AddressPool>) -> bool {
    move |pool| {
        let Some(pool) = pool else { return false };
        let Some(status) = &pool.status else {
            return false;
        };
        let ready_now = status.conditions.iter().any(|c| {
            c.type_ == "Ready"
                && c.status == ready
                && c.observed_generation == pool.metadata.generation
        });
        status.allocated == allocated && status.free == free && ready_now
    }
}

#[tokio::test]
async fn services_get_addresses_from_pools_and_overlaps_are_refused() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let kubectl = Kubectl::new(&env, "address-pools");
    match &kubectl {
        Some(k) => {
            let crd = crd_path().display().to_string();
            k.run(&["apply", "-f", &crd]).await;
            let established = "--for=condition=Established";
            k.run(&["wait", established, "crd/addresspools.metal.example.com"])
                .await;
        }
        None => {
            let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
            crds.create(&PostParams::default(), &address_pool::crd().unwrap())
                .await
                .unwrap();
        }
    }
    let pools: Api<AddressPool> = Api::all(client.clone());
    create(&pools, pool("blue", "192.0.2.0", "192.0.2.3", true)).await;
    create(
        &pools,
        pool("green", "198.51.100.10", "198.51.100.12", false),
    )
    .await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    create(&services, load_balancer("web", None)).await;
    create(&services, load_balancer("api", Some("green"))).await;

    let config = format!("--cloud-config={INVENTORY}");
    let args = ["--cloud-provider=static-inventory", &config];
    let args = [
        &args[..],
        &["--controllers=*,-route,address-pool", "--secure-port=0"],
    ]
    .concat();
    let mut ccm = ManagerProcess::start(env!("CARGO_BIN_EXE_metal-ccm"), &env, args).unwrap();

    // Auto-assigned from blue (the inventory's static VIPs are not used), and from green by name.
    ccm.wait_for(
        &services,
        "web",
        "web gets blue's first address",
        has_ip("192.0.2.0"),
    )
    .await
    .unwrap();
    ccm.wait_for(
        &services,
        "api",
        "api gets green's first address",
        has_ip("198.51.100.10"),
    )
    .await
    .unwrap();
    ccm.wait_for(
        &pools,
        "blue",
        "blue: 1 allocated, 3 free",
        counts(1, 3, "True"),
    )
    .await
    .unwrap();
    ccm.wait_for(
        &pools,
        "green",
        "green: 1 allocated, 2 free",
        counts(1, 2, "True"),
    )
    .await
    .unwrap();

    // A third pool overlapping blue is refused: condition, Event, and no address from it.
    create(&pools, pool("red", "192.0.2.2", "192.0.2.8", true)).await;
    ccm.wait_for(&pools, "red", "red refused", counts(0, 0, "False"))
        .await
        .unwrap();
    let red = pools.get("red").await.unwrap();
    let conditions = red.status.unwrap().conditions;
    let overlapping = conditions
        .iter()
        .find(|c| c.type_ == "Overlapping")
        .unwrap();
    assert_eq!(
        (overlapping.status.as_str(), overlapping.reason.as_str()),
        ("True", "OverlapsPool")
    );
    assert!(
        overlapping.message.contains("\"blue\""),
        "{}",
        overlapping.message
    );
    assert_eq!(overlapping.observed_generation, Some(1));
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let refused = |list: &[Event]| {
        list.iter().any(|e| {
            e.reason.as_deref() == Some("Overlapping")
                && e.type_.as_deref() == Some("Warning")
                && e.involved_object.name.as_deref() == Some("red")
        })
    };
    // Events have no condition to watch for: poll the list, ended by the manager's exit too.
    let listed = async || {
        while !refused(&events.list(&ListParams::default()).await.unwrap().items) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    ccm.until("an Overlapping event for red", listed())
        .await
        .unwrap();

    create(&services, load_balancer("cache", None)).await;
    ccm.wait_for(
        &services,
        "cache",
        "cache gets blue's next address",
        has_ip("192.0.2.1"),
    )
    .await
    .unwrap();
    ccm.wait_for(&pools, "blue", "blue: 2 allocated", counts(2, 2, "True"))
        .await
        .unwrap();

    if let Some(k) = &kubectl {
        let table = k.run(&["get", "addresspools"]).await;
        let rows: Vec<Vec<&str>> = table
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0][..5],
            ["NAME", "ASSIGNMENT", "ALLOCATED", "FREE", "READY"],
            "{table}"
        );
        let row = |name: &str| rows.iter().find(|r| r[0] == name).map(|r| r[1..5].to_vec());
        let row_is =
            |name: &str, cells: [&str; 4]| assert_eq!(row(name), Some(cells.to_vec()), "{table}");
        row_is("blue", ["Automatic", "2", "2", "True"]);
        row_is("green", ["Manual", "1", "2", "True"]);
        row_is("red", ["Automatic", "0", "0", "False"]);
    }

    // Deleting a Service releases its address: the count drops and the next Service gets it.
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    ccm.wait_for(
        &pools,
        "blue",
        "web's address released",
        counts(1, 3, "True"),
    )
    .await
    .unwrap();
    create(&services, load_balancer("late", None)).await;
    ccm.wait_for(
        &services,
        "late",
        "late reuses web's address",
        has_ip("192.0.2.0"),
    )
    .await
    .unwrap();

    // The overlap ends with the older pool: red is judged again and becomes Ready.
    pools
        .delete("blue", &DeleteParams::default())
        .await
        .unwrap();
    ccm.wait_for(
        &pools,
        "red",
        "red accepted once blue is gone",
        counts(0, 7, "True"),
    )
    .await
    .unwrap();
    ccm.stop().await.unwrap();

    // The pool informer is shared like every other: one streaming list (a WATCH, no LIST) for
    // the process.
    let by_ccm = |resource: &str, verb: &str| {
        let requests = Requests::of(&env).user_agent("metal-ccm");
        requests.resource(resource).verb(verb).count()
    };
    for resource in ["addresspools", "services"] {
        assert_eq!(by_ccm(resource, "list"), 0, "list {resource}");
        assert_eq!(by_ccm(resource, "watch"), 1, "watch {resource}");
    }
}
