//! `AddressPool` `v1alpha1`, still served through the conversion webhook: the first shape, with
//! `addresses` as strings (CIDRs, ranges, single addresses) and `autoAssign` as a boolean. Its
//! conversion to and from `v1` (the hub) is here, as `TryFrom` both ways.
//!
//! `v1alpha1` → `v1`: each string becomes one range; `autoAssign` becomes the assignment mode.
//! `v1` → `v1alpha1`: each range becomes its shortest text (one address, a CIDR when it is one
//! aligned block, else `first-last`), which reads back to the same range. What cannot be read
//! one way or the other (a string or a range that is not addresses) is refused, naming the field,
//! so the conversion review fails with a message rather than storing a pool that lost addresses.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::resource::{self, AddressPoolStatus, AddressRange, Assignment};

/// Where LoadBalancer ingress IPs may come from (`v1alpha1`).
// Each `printcolumn(..)` repeats the same keys, which clippy mistakes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "metal.example.com",
    version = "v1alpha1",
    kind = "AddressPool",
    plural = "addresspools",
    shortname = "apool",
    status = "AddressPoolStatus",
    doc = "A pool of addresses for LoadBalancer Services, handed out by metal-ccm's address-pool controller.",
    printcolumn(
        name = "Auto-Assign",
        type_ = "boolean",
        json_path = ".spec.autoAssign"
    ),
    printcolumn(name = "Allocated", type_ = "integer", json_path = ".status.allocated"),
    printcolumn(name = "Free", type_ = "integer", json_path = ".status.free"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AddressPoolSpec {
    /// CIDRs (`192.0.2.0/28`, `2001:db8::/120`) and inclusive ranges (`192.0.2.10-192.0.2.20`).
    pub addresses: Vec<String>,
    /// Whether Services without the `metal.example.com/address-pool` annotation may get an
    /// address from this pool. Pools are tried in name order.
    #[serde(default = "auto_assign_default")]
    pub auto_assign: bool,
}

fn auto_assign_default() -> bool {
    true
}

/// Why a pool cannot be converted: the field and what is wrong with it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ConversionError(String);

impl TryFrom<AddressPool> for resource::AddressPool {
    type Error = ConversionError;

    fn try_from(old: AddressPool) -> Result<Self, ConversionError> {
        let ranges = old
            .spec
            .addresses
            .iter()
            .enumerate()
            .map(|(i, text)| {
                AddressRange::parse(text)
                    .map(|r| r.to_spec())
                    .map_err(|why| ConversionError(format!("spec.addresses[{i}]: {why}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let assignment = match old.spec.auto_assign {
            true => Assignment::Automatic,
            false => Assignment::Manual,
        };
        Ok(resource::AddressPool {
            metadata: old.metadata,
            spec: resource::AddressPoolSpec {
                ranges,
                assignment: Some(assignment),
            },
            status: old.status,
        })
    }
}

impl TryFrom<resource::AddressPool> for AddressPool {
    type Error = ConversionError;

    fn try_from(new: resource::AddressPool) -> Result<Self, ConversionError> {
        let auto_assign = new.is_automatic();
        let addresses = new
            .spec
            .ranges
            .iter()
            .enumerate()
            .map(|(i, range)| {
                AddressRange::of(range)
                    .map(|r| r.to_string())
                    .map_err(|why| ConversionError(format!("spec.ranges[{i}]: {why}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AddressPool {
            metadata: new.metadata,
            spec: AddressPoolSpec {
                addresses,
                auto_assign,
            },
            status: new.status,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn alpha(addresses: &[&str], auto_assign: bool) -> AddressPool {
        serde_json::from_value(json!({
            "apiVersion": "metal.example.com/v1alpha1", "kind": "AddressPool",
            "metadata": {"name": "p", "labels": {"team": "a"}},
            "spec": {"addresses": addresses, "autoAssign": auto_assign},
        }))
        .unwrap()
    }

    #[test]
    fn both_ways_keep_the_addresses_and_the_mode() {
        let old = alpha(
            &["192.0.2.0/30", "198.51.100.7", "2001:db8::1-2001:db8::3"],
            false,
        );
        let new = resource::AddressPool::try_from(old.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(&new).unwrap()["spec"],
            json!({"ranges": [
                {"start": "192.0.2.0", "end": "192.0.2.3"},
                {"start": "198.51.100.7", "end": "198.51.100.7"},
                {"start": "2001:db8::1", "end": "2001:db8::3"},
            ], "assignment": "Manual"})
        );
        assert_eq!(new.metadata, old.metadata);
        let back = AddressPool::try_from(new).unwrap();
        assert_eq!((back.metadata, back.spec), (old.metadata, old.spec));
        // Unset in v1 is Automatic, as the defaulting webhook would write it.
        let mut unset = resource::AddressPool::try_from(alpha(&["192.0.2.9"], true)).unwrap();
        unset.spec.assignment = None;
        assert!(AddressPool::try_from(unset).unwrap().spec.auto_assign);
    }

    #[test]
    fn what_cannot_round_trip_is_refused_naming_the_field() {
        let err = resource::AddressPool::try_from(alpha(&["192.0.2.0/24", "nope"], true));
        assert_eq!(
            err.unwrap_err().to_string(),
            "spec.addresses[1]: \"nope\" in \"nope\" is not an IP address"
        );
        let mut new = resource::AddressPool::try_from(alpha(&["192.0.2.9"], true)).unwrap();
        new.spec.ranges[0].end = "2001:db8::1".into();
        assert_eq!(
            AddressPool::try_from(new).unwrap_err().to_string(),
            "spec.ranges[0]: 192.0.2.9-2001:db8::1 mixes IPv4 and IPv6"
        );
    }
}
