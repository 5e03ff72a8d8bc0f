//! Which k8s-pb message each served apiVersion and kind is, and the conversions through it.

use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::authorization::v1 as authz;
use k8s_pb::api::autoscaling::v1 as autoscaling;
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::discovery::v1 as discovery;
use k8s_pb::api::events::v1 as events;
use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::apis::meta::v1beta1 as meta_beta;
use prost::Message;
use serde_json::Value;

use super::convert::Json;

fn encode<T: Json + Message>(json: &Value) -> Result<Vec<u8>, String> {
    T::from_json(json).map(|m| m.encode_to_vec())
}

fn decode<T: Json + Message + Default>(raw: &[u8]) -> Result<Value, String> {
    let m = T::decode(raw).map_err(|e| e.to_string())?;
    Ok(m.to_json().unwrap_or(Value::Object(Default::default())))
}

macro_rules! kinds {
    ($($api_version:literal : $($kind:ident => $ty:ty),*;)*) => {
        /// The protobuf bytes of a JSON object of this kind; `None` for a kind without a
        /// protobuf form here.
        pub(super) fn from_json(
            api_version: &str,
            kind: &str,
            json: &Value,
        ) -> Option<Result<Vec<u8>, String>> {
            match (api_version, kind) {
                // Clients send DeleteOptions in the group-version of the resource they delete.
                (_, "DeleteOptions") => Some(encode::<meta::DeleteOptions>(json)),
                $($(($api_version, stringify!($kind)) => Some(encode::<$ty>(json)),)*)*
                _ => None,
            }
        }

        /// The JSON form (without apiVersion and kind) of an object's protobuf bytes.
        pub(super) fn to_json(
            api_version: &str,
            kind: &str,
            raw: &[u8],
        ) -> Option<Result<Value, String>> {
            match (api_version, kind) {
                (_, "DeleteOptions") => Some(decode::<meta::DeleteOptions>(raw)),
                $($(($api_version, stringify!($kind)) => Some(decode::<$ty>(raw)),)*)*
                _ => None,
            }
        }
    };
}

kinds! {
    "v1":
        Status => meta::Status,
        ConfigMap => core::ConfigMap, ConfigMapList => core::ConfigMapList,
        Secret => core::Secret, SecretList => core::SecretList,
        Namespace => core::Namespace, NamespaceList => core::NamespaceList,
        Service => core::Service, ServiceList => core::ServiceList,
        Node => core::Node, NodeList => core::NodeList,
        Endpoints => core::Endpoints, EndpointsList => core::EndpointsList,
        Event => core::Event, EventList => core::EventList,
        Pod => core::Pod, PodList => core::PodList,
        ServiceAccount => core::ServiceAccount, ServiceAccountList => core::ServiceAccountList,
        Binding => core::Binding;
    "coordination.k8s.io/v1": Lease => coordination::Lease, LeaseList => coordination::LeaseList;
    "events.k8s.io/v1": Event => events::Event, EventList => events::EventList;
    "discovery.k8s.io/v1":
        EndpointSlice => discovery::EndpointSlice, EndpointSliceList => discovery::EndpointSliceList;
    "autoscaling/v1": Scale => autoscaling::Scale;
    "authentication.k8s.io/v1":
        TokenReview => authn::TokenReview, TokenRequest => authn::TokenRequest;
    "authorization.k8s.io/v1":
        SubjectAccessReview => authz::SubjectAccessReview,
        SelfSubjectAccessReview => authz::SelfSubjectAccessReview,
        LocalSubjectAccessReview => authz::LocalSubjectAccessReview,
        SelfSubjectRulesReview => authz::SelfSubjectRulesReview;
    "rbac.authorization.k8s.io/v1":
        ClusterRole => rbac::ClusterRole, ClusterRoleList => rbac::ClusterRoleList,
        ClusterRoleBinding => rbac::ClusterRoleBinding,
        ClusterRoleBindingList => rbac::ClusterRoleBindingList,
        Role => rbac::Role, RoleList => rbac::RoleList,
        RoleBinding => rbac::RoleBinding, RoleBindingList => rbac::RoleBindingList;
    "apiextensions.k8s.io/v1":
        CustomResourceDefinition => ext::CustomResourceDefinition,
        CustomResourceDefinitionList => ext::CustomResourceDefinitionList;
    "meta.k8s.io/v1":
        PartialObjectMetadata => meta::PartialObjectMetadata,
        PartialObjectMetadataList => meta::PartialObjectMetadataList;
    // v1beta1's list numbers its fields the other way round; its items are v1's.
    "meta.k8s.io/v1beta1":
        PartialObjectMetadata => meta::PartialObjectMetadata,
        PartialObjectMetadataList => meta_beta::PartialObjectMetadataList;
}
