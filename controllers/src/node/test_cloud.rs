//! A tiny scriptable provider for unit tests of the node controllers: which facets exist, what
//! each call returns, which calls fail, and a log of the calls made.

use std::collections::HashMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use parking_lot::Mutex;

use crate::cloud::{
    CloudError, CloudProvider, InstanceMetadata, Instances, InstancesV2, Zone, Zones,
};

pub(crate) struct TestCloud {
    v2: bool,
    v1: bool,
    zones: bool,
    pub metadata: Mutex<Option<InstanceMetadata>>,
    pub exists: Mutex<bool>,
    pub shutdown: Mutex<bool>,
    failures: Mutex<HashMap<String, CloudError>>,
    calls: Mutex<Vec<String>>,
}

fn addr(a: &str) -> NodeAddress {
    NodeAddress {
        type_: "InternalIP".into(),
        address: a.into(),
    }
}

impl TestCloud {
    fn new(v2: bool, v1: bool, zones: bool) -> Self {
        Self {
            v2,
            v1,
            zones,
            metadata: Mutex::new(None),
            exists: Mutex::new(true),
            shutdown: Mutex::new(false),
            failures: Mutex::default(),
            calls: Mutex::default(),
        }
    }

    /// An InstancesV2-only provider returning `metadata`.
    pub fn v2(metadata: Option<InstanceMetadata>) -> Self {
        let c = Self::new(true, false, false);
        *c.metadata.lock() = metadata;
        c
    }

    /// A legacy provider, with or without the Zones facet.
    pub fn v1(zones: bool) -> Self {
        Self::new(false, true, zones)
    }

    /// Makes every later call named `method` fail with `err`.
    pub fn fail(&self, method: &str, err: CloudError) {
        self.failures.lock().insert(method.to_string(), err);
    }

    /// Makes `method` succeed again.
    pub fn heal(&self, method: &str) {
        self.failures.lock().remove(method);
    }

    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().clone()
    }

    fn call(&self, method: &str, arg: &str) -> Result<(), CloudError> {
        self.calls.lock().push(format!("{method} {arg}"));
        match self.failures.lock().get(method) {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }
}

fn name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

impl CloudProvider for TestCloud {
    fn instances(&self) -> Option<&dyn Instances> {
        self.v1.then_some(self as &dyn Instances)
    }
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        self.v2.then_some(self as &dyn InstancesV2)
    }
    fn zones(&self) -> Option<&dyn Zones> {
        self.zones.then_some(self as &dyn Zones)
    }
    fn provider_name(&self) -> &str {
        "test"
    }
    fn has_cluster_id(&self) -> bool {
        true
    }
}

#[async_trait]
impl InstancesV2 for TestCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        self.call("v2.instance_exists", name(node))?;
        Ok(*self.exists.lock())
    }
    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        self.call("v2.instance_shutdown", name(node))?;
        Ok(*self.shutdown.lock())
    }
    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        self.call("v2.instance_metadata", name(node))?;
        Ok(self.metadata.lock().clone())
    }
}

#[async_trait]
impl Instances for TestCloud {
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>, CloudError> {
        self.call("node_addresses", node_name)?;
        Ok(vec![addr("10.0.0.2")])
    }
    async fn node_addresses_by_provider_id(
        &self,
        id: &str,
    ) -> Result<Vec<NodeAddress>, CloudError> {
        self.call("node_addresses_by_provider_id", id)?;
        Ok(vec![addr("10.0.0.1")])
    }
    async fn instance_id(&self, node_name: &str) -> Result<String, CloudError> {
        self.call("instance_id", node_name)?;
        Ok(format!("id-{node_name}"))
    }
    async fn instance_type(&self, node_name: &str) -> Result<String, CloudError> {
        self.call("instance_type", node_name)?;
        Ok("type-by-name".into())
    }
    async fn instance_type_by_provider_id(&self, id: &str) -> Result<String, CloudError> {
        self.call("instance_type_by_provider_id", id)?;
        Ok("type-by-id".into())
    }
    async fn instance_exists_by_provider_id(&self, id: &str) -> Result<bool, CloudError> {
        self.call("instance_exists_by_provider_id", id)?;
        Ok(*self.exists.lock())
    }
    async fn instance_shutdown_by_provider_id(&self, id: &str) -> Result<bool, CloudError> {
        self.call("instance_shutdown_by_provider_id", id)?;
        Ok(*self.shutdown.lock())
    }
}

#[async_trait]
impl Zones for TestCloud {
    async fn get_zone_by_provider_id(&self, id: &str) -> Result<Zone, CloudError> {
        self.call("get_zone_by_provider_id", id)?;
        Ok(Zone {
            failure_domain: "zone-by-id".into(),
            region: "region-by-id".into(),
        })
    }
    async fn get_zone_by_node_name(&self, node_name: &str) -> Result<Zone, CloudError> {
        self.call("get_zone_by_node_name", node_name)?;
        Ok(Zone {
            failure_domain: "zone-by-name".into(),
            region: "region-by-name".into(),
        })
    }
}
