//! `static-inventory`: a cloud provider for bare metal, where the "cloud" is a file listing the
//! machines. It implements only what such a site has: instances (Node initialization and
//! addresses, deletion of Nodes whose machine left the inventory) and, when VIPs are listed, a
//! load-balancer facet that hands each LoadBalancer Service a VIP from a static pool. No routes,
//! zones or clusters facets: the CNI routes pods, and the node controllers use `InstancesV2`.
//! With the address-pool controller running ([`StaticInventory::factory_with`]), load balancers
//! get their addresses from `AddressPool` resources instead of the file.
//!
//! The file is read once at start; edit it and restart (or roll the Deployment) to change it.

mod inventory;
mod vip_pool;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use cloud_controllers::cloud::{
    BoxError, CloudError, CloudProvider, InstanceMetadata, InstancesV2, LoadBalancer,
};
use k8s_openapi::api::core::v1::Node;

use crate::address_pool::AddressPools;

pub use inventory::{Inventory, InventoryError, Machine};
pub use vip_pool::{VipPool, Vips};

/// The `--cloud-provider` name, also the provider-ID scheme (`static-inventory://ID`).
pub const NAME: &str = "static-inventory";

/// The provider: the inventory indexed by Node name and by ID.
pub struct StaticInventory {
    region: String,
    by_name: HashMap<String, Arc<Machine>>,
    by_id: HashMap<String, Arc<Machine>>,
    vips: Option<VipPool>,
    pools: Option<AddressPools>,
}

impl StaticInventory {
    /// A provider serving `inventory`.
    pub fn new(inventory: Inventory) -> Self {
        let machines: Vec<Arc<Machine>> = inventory.machines.into_iter().map(Arc::new).collect();
        let vips = (!inventory.load_balancer_vips.is_empty())
            .then(|| VipPool::new(Vips(inventory.load_balancer_vips)));
        StaticInventory {
            region: inventory.region,
            by_name: machines
                .iter()
                .map(|m| (m.name.clone(), m.clone()))
                .collect(),
            by_id: machines
                .iter()
                .map(|m| (m.id().to_string(), m.clone()))
                .collect(),
            vips,
            pools: None,
        }
    }

    /// Allocates load-balancer addresses from `pools` (the `AddressPool` resources) whenever the
    /// address-pool controller runs in this process, and from the file's `loadBalancerVIPs`
    /// otherwise.
    pub fn with_address_pools(mut self, pools: AddressPools) -> Self {
        self.pools = Some(pools);
        self
    }

    /// The registry factory of a provider [`with_address_pools`](Self::with_address_pools).
    pub fn factory_with(
        pools: AddressPools,
    ) -> impl Fn(Option<&[u8]>) -> Result<Arc<dyn CloudProvider>, BoxError> + Send + Sync + 'static
    {
        move |config| {
            let bytes = config.ok_or("--cloud-config must point at the inventory file")?;
            let inventory = Inventory::from_yaml(bytes)?;
            Ok(Arc::new(
                Self::new(inventory).with_address_pools(pools.clone()),
            ))
        }
    }

    /// The registry factory: `--cloud-config` is required and must be a valid inventory.
    pub fn factory(config: Option<&[u8]>) -> Result<Arc<dyn CloudProvider>, BoxError> {
        let bytes = config.ok_or("--cloud-config must point at the inventory file")?;
        Ok(Arc::new(Self::new(Inventory::from_yaml(bytes)?)))
    }

    /// The machine behind `node`: by provider ID once the Node has one, else by Node name.
    fn machine(&self, node: &Node) -> Result<Option<&Arc<Machine>>, CloudError> {
        let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.as_deref());
        match provider_id.filter(|p| !p.is_empty()) {
            Some(pid) => {
                let id = pid
                    .strip_prefix(NAME)
                    .and_then(|rest| rest.strip_prefix("://"))
                    .ok_or_else(|| {
                        CloudError::other(format!("provider ID {pid:?} is not {NAME}://ID"))
                    })?;
                Ok(self.by_id.get(id))
            }
            None => Ok(node
                .metadata
                .name
                .as_deref()
                .and_then(|n| self.by_name.get(n))),
        }
    }
}

impl CloudProvider for StaticInventory {
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        Some(self)
    }
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        match (&self.pools, &self.vips) {
            // Without static VIPs the pools answer, if only to say their controller is off.
            (Some(pools), vips) if pools.is_attached() || vips.is_none() => Some(pools.as_ref()),
            (_, vips) => vips.as_ref().map(|v| v as &dyn LoadBalancer),
        }
    }
    fn provider_name(&self) -> &str {
        NAME
    }
    fn has_cluster_id(&self) -> bool {
        // The inventory file is this cluster's own; nothing in it is shared with another one.
        true
    }
}

#[async_trait]
impl InstancesV2 for StaticInventory {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(self.machine(node)?.is_some())
    }

    async fn instance_shutdown(&self, _node: &Node) -> Result<bool, CloudError> {
        // The file knows nothing of power state; a powered-off machine is simply NotReady.
        Ok(false)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        let Some(m) = self.machine(node)? else {
            return Err(CloudError::InstanceNotFound);
        };
        Ok(Some(InstanceMetadata {
            provider_id: format!("{NAME}://{}", m.id()),
            instance_type: m.machine_type.clone(),
            node_addresses: m.addresses.clone(),
            zone: m.zone.clone(),
            region: self.region.clone(),
            additional_labels: m.labels.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn provider() -> StaticInventory {
        StaticInventory::new(
            Inventory::from_yaml(include_bytes!("../../inventory.example.yaml")).unwrap(),
        )
    }

    fn node(name: &str, provider_id: Option<&str>) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"providerID": provider_id},
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn metadata_comes_from_the_machine_with_the_node_name() {
        let p = provider();
        let md = p
            .instance_metadata(&node("rack1-node1", None))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(md.provider_id, "static-inventory://SN-4411");
        assert_eq!((md.zone.as_str(), md.region.as_str()), ("rack-1", "dc-1"));
        assert_eq!(md.instance_type, "r650");
        assert_eq!(md.node_addresses.len(), 2);
        assert_eq!(md.additional_labels["example.com/bmc"], "10.9.1.11");
    }

    #[tokio::test]
    async fn existence_follows_the_provider_id_once_set() {
        let p = &provider();
        let exists = |n: Node| async move { p.instance_exists(&n).await };
        assert!(
            exists(node("renamed", Some("static-inventory://SN-4411")))
                .await
                .unwrap()
        );
        assert!(
            !exists(node("rack1-node1", Some("static-inventory://gone")))
                .await
                .unwrap()
        );
        assert!(!exists(node("unknown", None)).await.unwrap());
        assert!(exists(node("x", Some("aws://i-1"))).await.is_err());
        let missing = p.instance_metadata(&node("unknown", None)).await;
        assert!(matches!(missing, Err(CloudError::InstanceNotFound)));
    }

    #[test]
    fn factory_needs_a_config_and_load_balancers_need_vips() {
        let err = StaticInventory::factory(None).err().unwrap();
        assert!(err.to_string().contains("--cloud-config"));
        assert!(provider().load_balancer().is_some());
        let no_vips = StaticInventory::factory(Some(b"machines: []")).unwrap();
        assert!(no_vips.load_balancer().is_none());
        assert!(no_vips.routes().is_none());
    }
}
