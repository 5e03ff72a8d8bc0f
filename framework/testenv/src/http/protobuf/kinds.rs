//! Which k8s-pb message an apiVersion and kind is: a served kind's or its list's (the kind's
//! `protobuf`), or one of the few messages the server speaks that are not kinds of the table.

use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::autoscaling::v1 as autoscaling;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::apis::meta::v1beta1 as meta_beta;
use serde_json::Value;

use crate::api::kind::{Decode, Encode};
use crate::api::kinds::TABLE;
use crate::api::protobuf::{decode, encode};

/// The messages that are no kind's: (apiVersion, kind, message). Clients send DeleteOptions in
/// the group-version of the resource they delete, so it is found by kind alone.
const OTHERS: &[(&str, &str, Encode, Decode)] = &[
    (
        "v1",
        "Status",
        encode::<meta::Status>,
        decode::<meta::Status>,
    ),
    (
        "v1",
        "Binding",
        encode::<core::Binding>,
        decode::<core::Binding>,
    ),
    (
        "autoscaling/v1",
        "Scale",
        encode::<autoscaling::Scale>,
        decode::<autoscaling::Scale>,
    ),
    (
        "authentication.k8s.io/v1",
        "TokenRequest",
        encode::<authn::TokenRequest>,
        decode::<authn::TokenRequest>,
    ),
    (
        "meta.k8s.io/v1",
        "PartialObjectMetadata",
        encode::<meta::PartialObjectMetadata>,
        decode::<meta::PartialObjectMetadata>,
    ),
    (
        "meta.k8s.io/v1",
        "PartialObjectMetadataList",
        encode::<meta::PartialObjectMetadataList>,
        decode::<meta::PartialObjectMetadataList>,
    ),
    // v1beta1's list numbers its fields the other way round; its items are v1's.
    (
        "meta.k8s.io/v1beta1",
        "PartialObjectMetadata",
        encode::<meta::PartialObjectMetadata>,
        decode::<meta::PartialObjectMetadata>,
    ),
    (
        "meta.k8s.io/v1beta1",
        "PartialObjectMetadataList",
        encode::<meta_beta::PartialObjectMetadataList>,
        decode::<meta_beta::PartialObjectMetadataList>,
    ),
];

/// The message of an apiVersion and kind, if it has a protobuf form here.
fn message(api_version: &str, kind: &str) -> Option<(Encode, Decode)> {
    if kind == "DeleteOptions" {
        return Some((encode::<meta::DeleteOptions>, decode::<meta::DeleteOptions>));
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let served = TABLE
        .iter()
        .filter(|k| k.ty.group == group && k.ty.version == version)
        .find_map(|k| match kind.strip_suffix("List") {
            _ if kind == k.ty.kind => Some(k.protobuf.kind),
            Some(item) if item == k.ty.kind => k.protobuf.list,
            _ => None,
        });
    served.or_else(|| {
        OTHERS
            .iter()
            .find(|(v, k, _, _)| *v == api_version && *k == kind)
            .map(|(_, _, e, d)| (*e, *d))
    })
}

/// The protobuf bytes of a JSON object of this kind; `None` for a kind without a protobuf form
/// here.
pub(super) fn from_json(
    api_version: &str,
    kind: &str,
    json: &Value,
) -> Option<Result<Vec<u8>, String>> {
    message(api_version, kind).map(|(encode, _)| encode(json))
}

/// The JSON form (without apiVersion and kind) of an object's protobuf bytes.
pub(super) fn to_json(api_version: &str, kind: &str, raw: &[u8]) -> Option<Result<Value, String>> {
    message(api_version, kind).map(|(_, decode)| decode(raw))
}
