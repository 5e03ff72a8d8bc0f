//! The conformance kit (`cloud-provider-conformance`) on the example provider, `static-inventory`,
//! with each of its two load-balancer facets: the static VIP list of its inventory file (one
//! `#[tokio::test]` per check, as `docs/writing-a-provider.md` shows), and the `AddressPool`
//! resources, read through informers from kube-testenv as the address-pool controller attaches
//! them. It has no routes, zones or legacy instances: those checks are skipped.

use std::time::Duration;

use cloud_provider_conformance::{Fixture, Instance, load_balancer_service};
use controller_manager::informer::SharedInformerFactory;
use embedding_examples::address_pool::{self, AddressPool, AddressPools};
use embedding_examples::static_inventory::{Inventory, StaticInventory};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube_testenv::TestEnv;
use tokio_util::sync::CancellationToken;

/// The example inventory: two machines and two VIPs.
fn inventory() -> Inventory {
    Inventory::from_yaml(include_bytes!("../inventory.example.yaml")).unwrap()
}

/// A machine of the inventory, one that is not (retired), and a Service to balance.
fn fixture() -> Fixture {
    Fixture::new(
        "kubernetes",
        Instance::new("rack1-node1", "static-inventory://SN-4411"),
        Instance::new("rack9-retired", "static-inventory://SN-0000"),
        load_balancer_service("default", "web", "7b3e1f52-9c4d-4a8e-b6f0-2d5c8a1e9f37"),
    )
}

async fn with_vips() -> (StaticInventory, Fixture) {
    (StaticInventory::new(inventory()), fixture())
}

mod static_vips {
    cloud_provider_conformance::conformance_tests!(super::with_vips);
}

#[tokio::test]
async fn static_inventory_with_address_pools_conforms() {
    let env = TestEnv::start().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    crds.create(&PostParams::default(), &address_pool::crd().unwrap())
        .await
        .unwrap();
    let pool: AddressPool = serde_json::from_value(serde_json::json!({
        "apiVersion": "metal.example.com/v1", "kind": "AddressPool",
        "metadata": {"name": "default"},
        "spec": {"ranges": [{"start": "198.51.100.0", "end": "198.51.100.3"}], "assignment": "Automatic"},
    }))
    .unwrap();
    Api::<AddressPool>::all(env.client())
        .create(&PostParams::default(), &pool)
        .await
        .unwrap();

    // What the address-pool controller's initializer does: attach the shared informers' stores.
    let factory = SharedInformerFactory::new(env.client());
    let pool_store = factory.informer::<AddressPool>().store();
    let service_store = factory.informer::<Service>().store();
    let stop = CancellationToken::new();
    factory.start(stop.clone());
    factory
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let pools = AddressPools::default();
    pools.attach(pool_store, service_store);

    let provider = StaticInventory::new(inventory()).with_address_pools(pools);
    let report = cloud_provider_conformance::run(&provider, &fixture()).await;
    stop.cancel();
    report.assert_passed();
    let ran = report.checks.len() - report.skipped().count();
    assert_eq!(
        ran, 16,
        "the provider-name, InstancesV2 and LoadBalancer checks ran:\n{report}"
    );
}
