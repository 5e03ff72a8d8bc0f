//! The fake cloud and the fixture every kit test runs on.

use cloud_provider_conformance::{Fixture, Instance, load_balancer_service};
use fake_cloud::{FakeCloud, FakeInstance, InstanceState};

/// The cluster name the fixture uses.
pub const CLUSTER: &str = "conformance";

/// A fake cloud with a running, a stopped and a deleted instance, and the fixture naming them.
pub fn fake_cloud() -> (FakeCloud, Fixture) {
    let cloud = FakeCloud::builder()
        .instance(
            FakeInstance::new("node-1")
                .zone("zone-a", "region-1")
                .internal_ip("10.0.0.1")
                .address("Hostname", "node-1"),
        )
        .instance(
            FakeInstance::new("node-stopped")
                .internal_ip("10.0.0.2")
                .state(InstanceState::Shutdown),
        )
        .instance(FakeInstance::new("node-deleted").internal_ip("10.0.0.3"))
        .lb_pool_cidr("192.0.2.0/29")
        .build()
        .expect("valid fake cloud");
    // Deleted, not never known: the fake answers "not found" only for machines it had.
    cloud.remove_instance("node-deleted");
    let fixture = Fixture::new(
        CLUSTER,
        Instance::new("node-1", "fake://node-1"),
        Instance::new("node-deleted", "fake://node-deleted"),
        load_balancer_service("default", "web", "3f1c2a9e-5b7d-4e61-9a0b-7c2d8e4f6a13"),
    )
    .stopped(Instance::new("node-stopped", "fake://node-stopped"))
    .route_cidrs(["10.244.1.0/24", "fd00:10:244:1::/64"]);
    (cloud, fixture)
}
