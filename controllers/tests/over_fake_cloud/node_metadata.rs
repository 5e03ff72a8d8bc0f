//! What the node controller reads from each provider facet, over the fake cloud.

use cloud_controllers::cloud::{CloudError, InstanceMetadata};
use cloud_controllers::node::metadata::{MetadataError, instance_addresses, instance_metadata};
use fake_cloud::{
    Facets, FakeCloud, FakeCloudBuilder, FakeInstance, FaultSpec, InstanceState, Method,
};
use k8s_openapi::api::core::v1::{Node, NodeAddress};

fn node(provider_id: Option<&str>) -> Node {
    fake_cloud::objects::node("n1", provider_id)
}

/// What `instance_metadata` returns for `n1`, which must be metadata.
async fn metadata_of(cloud: &FakeCloud, provider_id: Option<&str>) -> InstanceMetadata {
    let md = instance_metadata(cloud, &node(provider_id)).await;
    md.unwrap().expect("metadata, not \"not yet\"")
}

fn addr(a: &str) -> NodeAddress {
    NodeAddress {
        type_: "InternalIP".into(),
        address: a.into(),
    }
}

/// A cloud holding instance `n1` (`fake://n1`, `t1`, `10.0.0.1`, zone `z`/region `r`).
fn with_n1(builder: FakeCloudBuilder) -> FakeCloud {
    builder
        .instance(
            FakeInstance::new("n1")
                .instance_type("t1")
                .internal_ip("10.0.0.1")
                .zone("z", "r"),
        )
        .build()
        .unwrap()
}

/// A legacy provider: Instances, with or without Zones, and no InstancesV2.
fn v1(zones: bool) -> FakeCloud {
    with_n1(FakeCloud::builder().facets(Facets {
        instances: true,
        zones,
        ..Facets::none()
    }))
}

fn methods(cloud: &FakeCloud) -> Vec<Method> {
    cloud.calls().iter().map(|c| c.method).collect()
}

#[tokio::test]
async fn v2_metadata_is_used_as_is() {
    let cloud = with_n1(FakeCloud::builder());
    let md = metadata_of(&cloud, None).await;
    assert_eq!(md.provider_id, "fake://n1");
    assert_eq!(md.zone, "z");
    assert_eq!(methods(&cloud), vec![Method::InstanceMetadata]);
}

#[tokio::test]
async fn v2_without_provider_id_falls_back_to_the_node_or_fails() {
    let cloud = with_n1(FakeCloud::builder().metadata_without_provider_id(true));
    let md = metadata_of(&cloud, Some("fake://n1")).await;
    assert_eq!(md.provider_id, "fake://n1");
    let err = instance_metadata(&cloud, &node(None)).await.unwrap_err();
    assert!(
        matches!(err, MetadataError::MissingProviderId { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn v2_none_means_not_yet() {
    let cloud = with_n1(FakeCloud::builder());
    cloud
        .set_instance_state("n1", InstanceState::Pending)
        .unwrap();
    assert!(
        instance_metadata(&cloud, &node(None))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        instance_addresses(&cloud, &node(None))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn v1_builds_provider_id_and_uses_provider_id_lookups() {
    let cloud = v1(true);
    let md = metadata_of(&cloud, None).await;
    assert_eq!(md.provider_id, "fake://n1");
    assert_eq!(md.instance_type, "t1");
    assert_eq!(md.node_addresses, vec![addr("10.0.0.1")]);
    assert_eq!((md.zone.as_str(), md.region.as_str()), ("z", "r"));
    let calls: Vec<_> = cloud.calls().iter().map(|c| c.to_string()).collect();
    assert_eq!(
        calls,
        vec![
            "InstanceID(n1) -> ok",
            "InstanceTypeByProviderID(fake://n1) -> ok",
            "NodeAddressesByProviderID(fake://n1) -> ok",
            "GetZoneByProviderID(fake://n1) -> ok",
        ]
    );
}

#[tokio::test]
async fn v1_falls_back_to_name_lookups() {
    let cloud = v1(true);
    cloud.fail(
        Method::InstanceTypeByProviderID,
        FaultSpec::not_implemented(),
    );
    cloud.fail(
        Method::NodeAddressesByProviderID,
        FaultSpec::instance_not_found(),
    );
    cloud.fail(Method::GetZoneByProviderID, FaultSpec::other("boom"));
    let md = metadata_of(&cloud, Some("fake://n1")).await;
    assert_eq!(md.provider_id, "fake://n1");
    assert_eq!(md.instance_type, "t1");
    assert_eq!(md.node_addresses, vec![addr("10.0.0.1")]);
    assert_eq!(md.zone, "z");
    assert_eq!(
        methods(&cloud),
        vec![
            Method::InstanceTypeByProviderID,
            Method::InstanceType,
            Method::NodeAddressesByProviderID,
            Method::NodeAddresses,
            Method::GetZoneByProviderID,
            Method::GetZoneByNodeName,
        ],
        "no InstanceID lookup, and each value from the name-based fallback"
    );
}

#[tokio::test]
async fn v1_both_lookups_failing_is_an_error() {
    for (by_id, by_name) in [
        (Method::InstanceTypeByProviderID, Method::InstanceType),
        (Method::NodeAddressesByProviderID, Method::NodeAddresses),
        (Method::GetZoneByProviderID, Method::GetZoneByNodeName),
    ] {
        let cloud = v1(true);
        cloud.fail(by_id, FaultSpec::other("a"));
        cloud.fail(by_name, FaultSpec::other("b"));
        let err = instance_metadata(&cloud, &node(None)).await.unwrap_err();
        assert!(
            matches!(err, MetadataError::BothLookupsFailed { .. }),
            "{by_name}: {err}"
        );
    }
}

#[tokio::test]
async fn v1_provider_id_lookup_not_implemented_continues_other_errors_fail() {
    let cloud = v1(false);
    cloud.fail(Method::InstanceID, FaultSpec::not_implemented());
    let md = metadata_of(&cloud, None).await;
    assert_eq!(md.provider_id, "");
    assert_eq!(md.zone, "", "no Zones facet, no zone");

    let cloud = v1(false);
    cloud.fail(Method::InstanceID, FaultSpec::instance_not_found());
    let err = instance_metadata(&cloud, &node(None)).await.unwrap_err();
    assert!(matches!(
        err,
        MetadataError::Cloud(CloudError::InstanceNotFound)
    ));
}

#[tokio::test]
async fn v1_periodic_addresses_fall_back_to_name() {
    let cloud = v1(false);
    cloud.fail(Method::NodeAddressesByProviderID, FaultSpec::other("x"));
    let got = instance_addresses(&cloud, &node(Some("fake://n1")))
        .await
        .unwrap();
    assert_eq!(got, Some(vec![addr("10.0.0.1")]));
    assert_eq!(methods(&cloud).last(), Some(&Method::NodeAddresses));
}
