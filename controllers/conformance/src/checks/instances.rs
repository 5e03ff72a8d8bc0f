//! Checks of the legacy `Instances` and `Zones` facets, which the node controllers use only when
//! the provider has no `InstancesV2`.

use cloud_controllers::cloud::{CloudError, CloudProvider, instance_provider_id};

use super::vocabulary::{
    Check, Verdict, answer, called, check, expect, facet, passed, skipped, typed_addresses,
};
use crate::fixture::Fixture;
use crate::report::Failure;

pub(super) const CHECKS: &[Check] = &[
    check!(
        instance_id_rebuilds_the_provider_id,
        Instances,
        "cloud.go GetInstanceProviderID: the node controllers build the provider ID as \
         ProviderName() + \"://\" + InstanceID(name), so InstanceID returns the ID without the \
         scheme"
    ),
    check!(
        instance_id_is_instance_not_found_for_a_deleted_instance,
        Instances,
        "cloud.go Instances.InstanceID: a machine that does not exist is (\"\", \
         InstanceNotFound), the sentinel itself, which callers compare by identity"
    ),
    check!(
        instance_exists_by_provider_id_is_false_not_an_error_for_a_deleted_instance,
        Instances,
        "cloud.go Instances.InstanceExistsByProviderID: true for an existing instance; (false, \
         nil) for a deleted one, which makes the node-lifecycle controller delete its Node"
    ),
    check!(
        stopped_instance_exists_by_provider_id_and_reports_shutdown,
        Instances,
        "cloud.go Instances.InstanceExistsByProviderID: still true for a stopped instance; \
         InstanceShutdownByProviderID reports it true"
    ),
    check!(
        node_addresses_agree_by_name_and_provider_id,
        Instances,
        "cloud.go Instances.NodeAddresses / NodeAddressesByProviderID: the instance's typed \
         addresses, the same whichever way it is looked up"
    ),
    check!(
        zone_agrees_by_name_and_provider_id,
        Zones,
        "cloud.go Zones.GetZoneByProviderID / GetZoneByNodeName: the instance's zone and region \
         (its topology labels), the same whichever way it is looked up"
    ),
];

pub(super) async fn instance_id_rebuilds_the_provider_id(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let v1 = facet(p.instances(), "instances()")?;
    let call = format!(
        "ProviderName() + \"://\" + InstanceID({:?})",
        f.existing.node_name
    );
    let rebuilt = called(
        &call,
        instance_provider_id(p, v1, &f.existing.node_name).await,
    )?;
    expect(
        rebuilt == f.existing.provider_id,
        format!(
            "{call} to be the instance's provider ID {:?}",
            f.existing.provider_id
        ),
        rebuilt,
    )?;
    passed()
}

pub(super) async fn instance_id_is_instance_not_found_for_a_deleted_instance(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let v1 = facet(p.instances(), "instances()")?;
    let reply = v1.instance_id(&f.missing.node_name).await;
    expect(
        matches!(reply, Err(CloudError::InstanceNotFound)),
        format!(
            "InstanceID({:?}) of a deleted instance to be Err(CloudError::InstanceNotFound)",
            f.missing.node_name
        ),
        answer(&reply),
    )?;
    passed()
}

pub(super) async fn instance_exists_by_provider_id_is_false_not_an_error_for_a_deleted_instance(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let v1 = facet(p.instances(), "instances()")?;
    for (instance, want) in [(&f.existing, true), (&f.missing, false)] {
        let call = format!("InstanceExistsByProviderID({:?})", instance.provider_id);
        let reply = v1
            .instance_exists_by_provider_id(&instance.provider_id)
            .await;
        expect(
            matches!(reply, Ok(b) if b == want),
            format!("{call} to be Ok({want})"),
            answer(&reply),
        )?;
    }
    passed()
}

pub(super) async fn stopped_instance_exists_by_provider_id_and_reports_shutdown(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let v1 = facet(p.instances(), "instances()")?;
    let Some(stopped) = &f.stopped else {
        return skipped("the fixture has no stopped instance (Fixture::stopped)");
    };
    let id = &stopped.provider_id;
    let call = format!("InstanceExistsByProviderID({id:?})");
    let exists = called(&call, v1.instance_exists_by_provider_id(id).await)?;
    expect(
        exists,
        format!("{call} of a stopped instance to be Ok(true)"),
        Ok::<_, ()>(exists),
    )?;
    let call = format!("InstanceShutdownByProviderID({id:?})");
    let shutdown = called(&call, v1.instance_shutdown_by_provider_id(id).await)?;
    expect(
        shutdown,
        format!("{call} of a stopped instance to be Ok(true)"),
        Ok::<_, ()>(shutdown),
    )?;
    passed()
}

pub(super) async fn node_addresses_agree_by_name_and_provider_id(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let v1 = facet(p.instances(), "instances()")?;
    let call = format!("NodeAddresses({:?})", f.existing.node_name);
    let by_name = called(&call, v1.node_addresses(&f.existing.node_name).await)?;
    typed_addresses(&call, &by_name)?;
    let call = format!("NodeAddressesByProviderID({:?})", f.existing.provider_id);
    let by_id = called(
        &call,
        v1.node_addresses_by_provider_id(&f.existing.provider_id)
            .await,
    )?;
    expect(
        by_id == by_name,
        format!(
            "{call} to be NodeAddresses({:?}), {by_name:?}",
            f.existing.node_name
        ),
        by_id,
    )?;
    passed()
}

pub(super) async fn zone_agrees_by_name_and_provider_id(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let zones = facet(p.zones(), "zones()")?;
    let call = format!("GetZoneByProviderID({:?})", f.existing.provider_id);
    let by_id = called(
        &call,
        zones.get_zone_by_provider_id(&f.existing.provider_id).await,
    )?;
    let call = format!("GetZoneByNodeName({:?})", f.existing.node_name);
    let by_name = called(
        &call,
        zones.get_zone_by_node_name(&f.existing.node_name).await,
    )?;
    if by_id != by_name {
        return Err(Failure::new(
            format!("{call} to be GetZoneByProviderID's {by_id:?}"),
            format!("{by_name:?}"),
        ));
    }
    passed()
}
