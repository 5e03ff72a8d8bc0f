//! The smallest Node and Service to call the fake cloud with, for its tests and the controllers'.

use k8s_openapi::api::core::v1::{Node, NodeSpec, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A Node called `name` with `spec.providerID` set to `provider_id`, or unset.
pub fn node(name: &str, provider_id: Option<&str>) -> Node {
    let mut node = Node {
        spec: Some(NodeSpec {
            provider_id: provider_id.map(str::to_owned),
            ..NodeSpec::default()
        }),
        ..Node::default()
    };
    node.metadata.name = Some(name.to_owned());
    node
}

/// The Service `default/<name>` with UID `uid` and no spec.
pub fn service(name: &str, uid: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        },
        ..Service::default()
    }
}
