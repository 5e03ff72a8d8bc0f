//! Read access to cached Nodes for every controller that lists them (node, node-lifecycle, route,
//! service): the [`NodeLister`] trait, the informer's `Store<Node>` behind it in production, and
//! [`MemoryNodeLister`] for tests and tools without an informer.

use std::collections::BTreeMap;
use std::sync::Arc;

use controller_manager::informer::Store;
use k8s_openapi::api::core::v1::Node;
use parking_lot::RwLock;

/// Read access to cached Nodes, so controller logic does not depend on the informer
/// implementation (the framework's `Store<Node>` in production, [`MemoryNodeLister`] in tests).
pub trait NodeLister: Send + Sync {
    /// The cached Node called `name`, if any; the default scans [`Self::list`], so listers
    /// without an index (test vectors) only implement `list`.
    fn get(&self, name: &str) -> Option<Arc<Node>> {
        self.list()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
    }
    /// Every cached Node.
    fn list(&self) -> Vec<Arc<Node>>;
}

/// A [`NodeLister`] over a map the caller fills, for tests and tools that have no informer.
#[derive(Default)]
pub struct MemoryNodeLister(RwLock<BTreeMap<String, Arc<Node>>>);

impl MemoryNodeLister {
    /// Stores (or replaces) `node` under its name.
    pub fn insert(&self, node: Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        self.0.write().insert(name, Arc::new(node));
    }

    /// Forgets the Node called `name`.
    pub fn remove(&self, name: &str) {
        self.0.write().remove(name);
    }

    /// Replaces the whole content, as a relist would.
    pub fn replace(&self, nodes: impl IntoIterator<Item = Node>) {
        let map = nodes
            .into_iter()
            .map(|n| (n.metadata.name.clone().unwrap_or_default(), Arc::new(n)))
            .collect();
        *self.0.write() = map;
    }
}

impl NodeLister for MemoryNodeLister {
    fn get(&self, name: &str) -> Option<Arc<Node>> {
        self.0.read().get(name).cloned()
    }

    fn list(&self) -> Vec<Arc<Node>> {
        self.0.read().values().cloned().collect()
    }
}

impl NodeLister for Store<Node> {
    fn get(&self, name: &str) -> Option<Arc<Node>> {
        self.get_by_name(name)
    }
    fn list(&self) -> Vec<Arc<Node>> {
        Store::list(self)
    }
}
