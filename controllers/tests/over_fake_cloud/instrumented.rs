//! Delegation, metrics and spans of the instrumented provider, around the fake cloud.

use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

use std::sync::Arc;

use cloud_controllers::cloud::{CloudError, CloudMetrics, CloudProvider, InstrumentedCloud};
use fake_cloud::{
    Facets, FakeCloud, FakeInstance, FaultSpec, Method, default_load_balancer_name, objects,
};
use k8s_openapi::api::core::v1::{Node, Service};

/// The fake cloud with a load balancer and InstancesV2 only: `GetLoadBalancer` asks to retry in
/// 5 s, `InstanceShutdown` fails, and `InstanceExists` of `gone` answers InstanceNotFound.
fn fake() -> FakeCloud {
    let cloud = FakeCloud::builder()
        .facets(Facets {
            load_balancer: true,
            instances_v2: true,
            ..Facets::none()
        })
        .instance(FakeInstance::new("n"))
        .instance(FakeInstance::new("n1"))
        .instance(FakeInstance::new("n2"))
        .lb_pool_cidr("10.0.0.0/29")
        .build()
        .expect("a valid fake cloud");
    cloud.fail(
        Method::GetLoadBalancer,
        FaultSpec::retry("busy", Duration::from_secs(5)),
    );
    cloud.fail(
        Method::InstanceShutdown,
        FaultSpec::other("api unreachable"),
    );
    cloud.fail(
        Method::InstanceExists,
        FaultSpec::instance_not_found().only_for("gone"),
    );
    cloud
}

fn node(name: &str) -> Node {
    objects::node(name, None)
}

fn wrapped(registry: &mut Registry) -> InstrumentedCloud {
    InstrumentedCloud::new(Arc::new(fake()), Some(CloudMetrics::new(registry)))
}

#[tokio::test]
async fn offers_exactly_the_inner_facets_and_delegates() {
    let cloud = wrapped(&mut Registry::default());
    assert!(cloud.load_balancer().is_some());
    assert!(cloud.instances_v2().is_some());
    assert!(cloud.instances().is_none());
    assert!(cloud.zones().is_none());
    assert!(cloud.clusters().is_none());
    assert!(cloud.routes().is_none());
    assert_eq!(cloud.provider_name(), "fake");
    assert!(cloud.has_cluster_id());

    let lb = cloud.load_balancer().unwrap();
    let nodes = vec![Arc::new(node("n1")), Arc::new(node("n2"))];
    let status = lb
        .ensure_load_balancer("c", &Service::default(), &nodes)
        .await
        .unwrap();
    let ip = status.ingress.unwrap()[0].ip.clone().unwrap();
    assert!(ip.starts_with("10.0.0."), "{ip}");
    assert_eq!(
        lb.get_load_balancer_name("c", &Service::default()),
        default_load_balancer_name(&Service::default())
    );
    assert_eq!(
        lb.get_load_balancer("c", &Service::default())
            .await
            .unwrap_err()
            .retry_after(),
        Some(Duration::from_secs(5))
    );
    let v2 = cloud.instances_v2().unwrap();
    let meta = v2.instance_metadata(&node("n1")).await.unwrap().unwrap();
    assert_eq!(meta.provider_id, "fake://n1");
    assert!(matches!(
        v2.instance_exists(&node("gone")).await,
        Err(CloudError::InstanceNotFound)
    ));
}

#[tokio::test]
async fn every_call_is_counted_by_outcome_and_timed() {
    let mut registry = Registry::default();
    let cloud = wrapped(&mut registry);
    let v2 = cloud.instances_v2().unwrap();
    v2.instance_exists(&node("n1")).await.unwrap();
    v2.instance_exists(&node("n2")).await.unwrap();
    let _ = v2.instance_exists(&node("gone")).await;
    let _ = v2.instance_shutdown(&node("n1")).await;
    let _ = cloud
        .load_balancer()
        .unwrap()
        .get_load_balancer("c", &Service::default())
        .await;

    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    for line in [
        r#"cloud_provider_requests_total{provider="fake",method="InstanceExists",outcome="success"} 2"#,
        r#"cloud_provider_requests_total{provider="fake",method="InstanceExists",outcome="not_found"} 1"#,
        r#"cloud_provider_requests_total{provider="fake",method="InstanceShutdown",outcome="error"} 1"#,
        r#"cloud_provider_requests_total{provider="fake",method="GetLoadBalancer",outcome="retry"} 1"#,
        r#"cloud_provider_request_duration_seconds_count{provider="fake",method="InstanceExists"} 3"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}
