//! The inventory file (`--cloud-config`): the machines of a bare-metal cluster, read once at
//! start. `inventory.example.yaml` in this crate shows every field and is parsed by a test.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use cloud_controllers::cloud::{ConfigFileError, parse_cloud_config};
use k8s_openapi::api::core::v1::NodeAddress;
use serde::Deserialize;

/// Why an inventory file was rejected; the message says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// Not YAML, or an unknown or mistyped field (named with its line, never its value).
    #[error("invalid inventory: {0}")]
    Yaml(#[from] ConfigFileError),
    /// Two machines share a Node name or an ID.
    #[error("machine name or id {0:?} appears twice: each must be unique")]
    Duplicate(String),
    /// A machine without a name can never match a Node.
    #[error("every machine needs a non-empty name (its Node name)")]
    EmptyName,
}

/// The whole file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Inventory {
    /// Region of every machine.
    #[serde(default)]
    pub region: String,
    /// The machines, by Node name.
    #[serde(default)]
    pub machines: Vec<Machine>,
    /// Addresses Services of type LoadBalancer may get; empty means no load balancers.
    #[serde(default, rename = "loadBalancerVIPs")]
    pub load_balancer_vips: Vec<IpAddr>,
}

/// One machine; becomes the metadata of the Node with the same name.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Machine {
    /// The Node name.
    pub name: String,
    /// Asset tag or serial; defaults to `name`.
    #[serde(default)]
    pub id: Option<String>,
    /// Hardware model, for the instance-type label.
    #[serde(default, rename = "type")]
    pub machine_type: String,
    /// Rack or room, for the zone label.
    #[serde(default)]
    pub zone: String,
    /// Addresses published on the Node.
    #[serde(default)]
    pub addresses: Vec<NodeAddress>,
    /// Extra labels for the Node.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl Machine {
    /// The ID used in the provider ID.
    pub fn id(&self) -> &str {
        self.id.as_deref().unwrap_or(&self.name)
    }
}

impl Inventory {
    /// Parses and checks an inventory file.
    pub fn from_yaml(bytes: &[u8]) -> Result<Self, InventoryError> {
        let inventory: Inventory = parse_cloud_config(bytes)?;
        let mut seen = HashSet::new();
        for m in &inventory.machines {
            if m.name.is_empty() {
                return Err(InventoryError::EmptyName);
            }
            if !seen.insert(("name", m.name.as_str())) {
                return Err(InventoryError::Duplicate(m.name.clone()));
            }
            if !seen.insert(("id", m.id())) {
                return Err(InventoryError::Duplicate(m.id().to_string()));
            }
        }
        Ok(inventory)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_file_parses() {
        let inv = Inventory::from_yaml(include_bytes!("../../inventory.example.yaml")).unwrap();
        assert_eq!(inv.region, "dc-1");
        assert_eq!(inv.machines.len(), 2);
        assert_eq!(inv.machines[0].id(), "SN-4411");
        assert_eq!(inv.machines[1].id(), "rack2-node1");
        assert_eq!(inv.machines[0].addresses[1].type_, "Hostname");
        assert_eq!(inv.load_balancer_vips.len(), 2);
    }

    #[test]
    fn mistakes_are_named() {
        let e = Inventory::from_yaml(b"machines: [{name: a, zone: x, rack: 1}]").unwrap_err();
        assert!(e.to_string().contains("rack"), "{e}");
        let e = Inventory::from_yaml(b"machines: [{name: a}, {name: b, id: a}]").unwrap_err();
        assert_eq!(
            e.to_string(),
            "machine name or id \"a\" appears twice: each must be unique"
        );
        // A mistyped field next to a secret-looking value: key and line, not the value.
        let e = Inventory::from_yaml(b"region: dc-1\nmachines: [{name: a, labels: [s3cr3t]}]")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid inventory: key machines[0].labels (line 2, column 30): expected mapping start"
        );
        let e = Inventory::from_yaml(b"machines: [{name: ''}]").unwrap_err();
        assert!(matches!(e, InventoryError::EmptyName));
    }
}
