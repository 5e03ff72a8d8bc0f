//! The stock cloud controllers as an initializer map, under upstream's canonical names and
//! permanent aliases. Embedders merge their own entries into it.

use controller_manager::manager::Initializers;

use crate::context::CloudContext;
use crate::{node, node_lifecycle, route, service};

/// `cloud-node-controller`, `cloud-node-lifecycle-controller`, `service-lb-controller` and
/// `node-route-controller`, all on by default (upstream disables none).
pub fn cloud_initializers() -> Initializers<CloudContext> {
    Initializers::new()
        .with(node::initializer())
        .with(node_lifecycle::initializer())
        .with(service::initializer())
        .with(route::initializer())
}
