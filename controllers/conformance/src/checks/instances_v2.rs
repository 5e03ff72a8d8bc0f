//! Checks of `InstancesV2`, the facet the node and node-lifecycle controllers use: existence
//! (`false` deletes the Node), shutdown (taints it) and the metadata a Node is initialized from.

use cloud_controllers::cloud::CloudProvider;

use super::vocabulary::{
    Check, Verdict, called, check, expect, facet, passed, skipped, typed_addresses,
};
use crate::fixture::{Fixture, Instance, node};

pub(super) const CHECKS: &[Check] = &[
    check!(
        instance_exists_for_a_running_instance,
        InstancesV2,
        "cloud.go InstancesV2.InstanceExists: true for an instance the cloud has, found by \
         node.spec.providerID or by node name (before the Node has a provider ID)"
    ),
    check!(
        instance_exists_is_false_not_an_error_for_a_deleted_instance,
        InstancesV2,
        "cloud.go InstancesV2.InstanceExists: (false, nil) is how a provider says the machine is \
         gone, and the only answer that makes the node-lifecycle controller delete the Node; an \
         error (InstanceNotFound included) keeps a dead Node forever"
    ),
    check!(
        instance_shutdown_is_false_for_a_running_instance,
        InstancesV2,
        "cloud.go InstancesV2.InstanceShutdown: true only for a shut-down instance (true taints a \
         NotReady Node node.cloudprovider.kubernetes.io/shutdown)"
    ),
    check!(
        stopped_instance_exists_and_reports_shutdown,
        InstancesV2,
        "cloud.go InstancesV2: a stopped instance still exists (InstanceExists true, so its Node \
         is kept) and InstanceShutdown reports it true"
    ),
    check!(
        instance_metadata_describes_the_instance,
        InstancesV2,
        "cloud.go InstancesV2.InstanceMetadata: the metadata a Node is initialized from (its \
         addresses become status.addresses, typed as core/v1 NodeAddressType), the same whether \
         the Node is found by provider ID or, before it has one, by name"
    ),
    check!(
        instance_metadata_provider_id_is_the_providers,
        InstancesV2,
        "cloud.go InstanceMetadata.ProviderID: set as node.spec.providerID (immutable once set), \
         in the `<provider-name>://<instance-id>` format with the provider's ProviderName, and \
         stable (the ID the fixture's Node has)"
    ),
    check!(
        instance_lookup_prefers_the_provider_id,
        InstancesV2,
        "cloud.go InstancesV2.InstanceMetadata: implementations check node.spec.providerID first, \
         and use the name only while it is empty (a renamed Node keeps its machine)"
    ),
];

pub(super) async fn instance_exists_for_a_running_instance(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let v2 = facet(p.instances_v2(), "instances_v2()")?;
    for (how, node) in [
        ("by provider ID", f.existing.node()),
        ("by name", f.existing.unregistered_node()),
    ] {
        let call = format!("InstanceExists({:?}, {how})", f.existing.node_name);
        let exists = called(&call, v2.instance_exists(&node).await)?;
        expect(
            exists,
            format!("{call} to be Ok(true)"),
            Ok::<_, ()>(exists),
        )?;
    }
    passed()
}

pub(super) async fn instance_exists_is_false_not_an_error_for_a_deleted_instance(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let v2 = facet(p.instances_v2(), "instances_v2()")?;
    for (how, node) in [
        ("by provider ID", f.missing.node()),
        ("by name", f.missing.unregistered_node()),
    ] {
        let call = format!("InstanceExists({:?}, {how})", f.missing.node_name);
        let reply = v2.instance_exists(&node).await;
        let got = super::vocabulary::answer(&reply);
        expect(
            matches!(reply, Ok(false)),
            format!("{call} of a deleted instance to be Ok(false), not an error"),
            got,
        )?;
    }
    passed()
}

pub(super) async fn instance_shutdown_is_false_for_a_running_instance(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let v2 = facet(p.instances_v2(), "instances_v2()")?;
    let call = format!("InstanceShutdown({:?})", f.existing.provider_id);
    let shutdown = called(&call, v2.instance_shutdown(&f.existing.node()).await)?;
    expect(
        !shutdown,
        format!("{call} of a running instance to be Ok(false)"),
        Ok::<_, ()>(shutdown),
    )?;
    passed()
}

pub(super) async fn stopped_instance_exists_and_reports_shutdown(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let v2 = facet(p.instances_v2(), "instances_v2()")?;
    let Some(stopped) = &f.stopped else {
        return skipped("the fixture has no stopped instance (Fixture::stopped)");
    };
    let node = stopped.node();
    let call = format!("InstanceExists({:?})", stopped.provider_id);
    let exists = called(&call, v2.instance_exists(&node).await)?;
    expect(
        exists,
        format!("{call} of a stopped instance to be Ok(true)"),
        Ok::<_, ()>(exists),
    )?;
    let call = format!("InstanceShutdown({:?})", stopped.provider_id);
    let shutdown = called(&call, v2.instance_shutdown(&node).await)?;
    expect(
        shutdown,
        format!("{call} of a stopped instance to be Ok(true)"),
        Ok::<_, ()>(shutdown),
    )?;
    passed()
}

pub(super) async fn instance_metadata_describes_the_instance(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let v2 = facet(p.instances_v2(), "instances_v2()")?;
    let call = format!(
        "InstanceMetadata({:?}, by provider ID)",
        f.existing.node_name
    );
    let by_id = called(&call, v2.instance_metadata(&f.existing.node()).await)?;
    let Some(by_id) = by_id else {
        return Err(crate::report::Failure::new(
            format!("{call} of a running instance to be Some(metadata)"),
            "Ok(None)",
        ));
    };
    typed_addresses(&call, &by_id.node_addresses)?;
    let call = format!("InstanceMetadata({:?}, by name)", f.existing.node_name);
    let by_name = called(
        &call,
        v2.instance_metadata(&f.existing.unregistered_node()).await,
    )?;
    expect(
        by_name.as_ref() == Some(&by_id),
        format!("{call} to be the metadata found by provider ID, {by_id:?}"),
        by_name,
    )?;
    passed()
}

pub(super) async fn instance_metadata_provider_id_is_the_providers(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let v2 = facet(p.instances_v2(), "instances_v2()")?;
    let call = format!("InstanceMetadata({:?}, by name)", f.existing.node_name);
    let metadata = called(
        &call,
        v2.instance_metadata(&f.existing.unregistered_node()).await,
    )?;
    let provider_id = metadata.map(|m| m.provider_id).unwrap_or_default();
    if provider_id.is_empty() {
        return skipped(
            "InstanceMetadata reports no provider ID (the kubelet's --provider-id must set it)",
        );
    }
    let scheme = format!("{}://", p.provider_name());
    let well_formed = provider_id
        .strip_prefix(&scheme)
        .is_some_and(|id| !id.is_empty());
    expect(
        well_formed,
        format!("{call} to report a provider ID of the form {scheme}<instance-id>"),
        &provider_id,
    )?;
    expect(
        provider_id == f.existing.provider_id,
        format!(
            "{call} to report the instance's provider ID {:?}",
            f.existing.provider_id
        ),
        &provider_id,
    )?;
    passed()
}

pub(super) async fn instance_lookup_prefers_the_provider_id(
    p: &dyn CloudProvider,
    f: &Fixture,
) -> Verdict {
    let v2 = facet(p.instances_v2(), "instances_v2()")?;
    let renamed = Instance::new(
        format!("{}-renamed", f.existing.node_name),
        &f.existing.provider_id,
    );
    let node = node(&renamed.node_name, Some(&renamed.provider_id));
    let call = format!(
        "InstanceExists(Node {:?} with provider ID {:?})",
        renamed.node_name, renamed.provider_id
    );
    let exists = v2.instance_exists(&node).await;
    let got = super::vocabulary::answer(&exists);
    expect(
        matches!(exists, Ok(true)),
        format!("{call} to be Ok(true)"),
        got,
    )?;
    let call = format!(
        "InstanceMetadata(Node {:?} with provider ID {:?})",
        renamed.node_name, renamed.provider_id
    );
    let renamed_md = called(&call, v2.instance_metadata(&node).await)?;
    let original = called(
        "InstanceMetadata",
        v2.instance_metadata(&f.existing.node()).await,
    )?;
    expect(
        renamed_md.is_some() && renamed_md == original,
        format!(
            "{call} to be the metadata of {:?}, {original:?}",
            f.existing.node_name
        ),
        renamed_md,
    )?;
    passed()
}
