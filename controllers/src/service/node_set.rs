//! The eligible node set, computed once per change of the Node cache and shared by every load
//! balancer that sees it. A node sync used to list and filter every Node and build two maps of
//! every name for each load balancer it visited (3,000 Nodes × 1,000 load balancers: about
//! 3.4 ms each, per pass); now a pass filters the Nodes once, and whether a load balancer's
//! recorded set is "sufficiently equal" (upstream `nodesSufficientlyEqual`: the same names with
//! the same provider IDs) is a comparison of two numbers. The recorded sets are shared too: at
//! 1,000 load balancers over 3,000 Nodes separate copies were 24 MB of the heap profile.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::Node;
use parking_lot::Mutex;

use super::NodeLister;
use super::predicates::{filter_lb_nodes, provider_id};

/// Counts changes of the Node cache; the Node handler bumps it on every event, after the cache
/// took the change, so an [`EligibleNodeCache`] lists the Nodes again only after one.
#[derive(Clone, Debug, Default)]
pub struct NodeRevision(Arc<AtomicU64>);

impl NodeRevision {
    /// The Node cache changed.
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// One eligible node set, as load balancers are given it.
#[derive(Debug)]
pub(super) struct EligibleNodes {
    nodes: Vec<Arc<Node>>,
    /// A hash of the sorted (name, provider ID) pairs: what the cloud is told.
    fingerprint: u64,
    /// The same for two sets whose pairs are equal and that were built one after the other;
    /// a set equal to one further back gets a new generation, and its fingerprint tells.
    generation: u64,
}

impl EligibleNodes {
    /// The Nodes, in the cache's order.
    pub(super) fn nodes(&self) -> &[Arc<Node>] {
        &self.nodes
    }

    /// Whether the cloud would see no difference between the two sets (upstream
    /// `nodesSufficientlyEqual`): O(1), except for two sets with the same fingerprint that were
    /// not built one after the other (a set that changed and changed back), which are compared
    /// pair by pair so a hash collision can never hide a change.
    pub(super) fn same_for_the_cloud(&self, other: &EligibleNodes) -> bool {
        self.generation == other.generation
            || (self.fingerprint == other.fingerprint && same_pairs(&self.nodes, &other.nodes))
    }
}

/// The (name, provider ID) pairs of `nodes`, sorted by name.
fn pairs(nodes: &[Arc<Node>]) -> Vec<(&str, &str)> {
    let mut pairs: Vec<(&str, &str)> = nodes
        .iter()
        .map(|n| {
            (
                n.metadata.name.as_deref().unwrap_or_default(),
                provider_id(n),
            )
        })
        .collect();
    // The informer's store hands them out in name order already; a test vector may not.
    if !pairs.is_sorted() {
        pairs.sort_unstable();
    }
    pairs
}

fn fingerprint(nodes: &[Arc<Node>]) -> u64 {
    let mut hasher = DefaultHasher::new();
    pairs(nodes).hash(&mut hasher);
    hasher.finish()
}

fn same_pairs(a: &[Arc<Node>], b: &[Arc<Node>]) -> bool {
    a.len() == b.len() && pairs(a) == pairs(b)
}

/// Hands out the current [`EligibleNodes`], shared: it lists and filters the Nodes again only
/// when the Node cache changed since (with a [`NodeRevision`]; without one, on every call), and
/// keeps the last set when the new one holds the same objects.
#[derive(Debug, Default)]
pub(super) struct EligibleNodeCache {
    revision: Option<NodeRevision>,
    /// The last set, and the revision it was listed at.
    latest: Mutex<Option<(u64, Arc<EligibleNodes>)>>,
    generations: AtomicU64,
}

impl EligibleNodeCache {
    /// A cache rebuilt only after `revision` moved.
    pub(super) fn tracking(revision: NodeRevision) -> Self {
        Self {
            revision: Some(revision),
            ..Self::default()
        }
    }

    /// The eligible set of the Nodes `lister` holds now.
    pub(super) fn current(&self, lister: &dyn NodeLister) -> Arc<EligibleNodes> {
        let mut latest = self.latest.lock();
        // Read before listing: a change after this read moves the revision past it.
        let revision = self.revision.as_ref().map(NodeRevision::get);
        if let (Some(now), Some((seen, set))) = (revision, latest.as_ref())
            && *seen == now
        {
            return set.clone();
        }
        let nodes = filter_lb_nodes(&lister.list());
        let set = match latest.as_ref() {
            Some((_, last))
                if last.nodes.len() == nodes.len()
                    && last
                        .nodes
                        .iter()
                        .zip(&nodes)
                        .all(|(a, b)| Arc::ptr_eq(a, b)) =>
            {
                last.clone()
            }
            last => {
                let fingerprint = fingerprint(&nodes);
                let generation = match last {
                    Some((_, last))
                        if last.fingerprint == fingerprint && same_pairs(&last.nodes, &nodes) =>
                    {
                        last.generation
                    }
                    _ => self.generations.fetch_add(1, Ordering::Relaxed) + 1,
                };
                Arc::new(EligibleNodes {
                    nodes,
                    fingerprint,
                    generation,
                })
            }
        };
        *latest = Some((revision.unwrap_or_default(), set.clone()));
        set
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::listers::MemoryNodeLister;
    use crate::service::predicates::{EXCLUDE_FROM_LOAD_BALANCERS_LABEL, nodes_sufficiently_equal};

    fn node(name: &str, provider: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            provider_id: Some(provider.into()),
            ..Default::default()
        });
        n
    }

    /// A lister that counts how often it was listed.
    #[derive(Default)]
    struct Counting {
        nodes: MemoryNodeLister,
        lists: AtomicUsize,
    }

    impl NodeLister for Counting {
        fn list(&self) -> Vec<Arc<Node>> {
            self.lists.fetch_add(1, Ordering::Relaxed);
            self.nodes.list()
        }
    }

    #[test]
    fn the_nodes_are_listed_again_only_after_the_cache_changed() {
        let lister = Counting::default();
        lister.nodes.insert(node("a", "fake://a"));
        let revision = NodeRevision::default();
        let cache = EligibleNodeCache::tracking(revision.clone());
        let first = cache.current(&lister);
        for _ in 0..1000 {
            assert!(
                Arc::ptr_eq(&cache.current(&lister), &first),
                "one set per pass"
            );
        }
        assert_eq!(lister.lists.load(Ordering::Relaxed), 1);

        lister.nodes.insert(node("b", "fake://b"));
        assert!(
            Arc::ptr_eq(&cache.current(&lister), &first),
            "not seen before the bump"
        );
        revision.bump();
        let second = cache.current(&lister);
        assert_eq!(second.nodes().len(), 2);
        assert!(!second.same_for_the_cloud(&first));
        assert_eq!(lister.lists.load(Ordering::Relaxed), 2);

        // A change that is no change of the set (another version of the same objects) keeps
        // the set as it was.
        revision.bump();
        assert!(Arc::ptr_eq(&cache.current(&lister), &second));
    }

    #[test]
    fn without_a_revision_every_call_lists_but_the_same_objects_share_one_set() {
        let lister = Counting::default();
        lister.nodes.insert(node("a", "fake://a"));
        let cache = EligibleNodeCache::default();
        let first = cache.current(&lister);
        assert!(Arc::ptr_eq(&cache.current(&lister), &first));
        assert_eq!(lister.lists.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn sameness_is_upstreams_sufficiently_equal() {
        let lister = MemoryNodeLister::default();
        let revision = NodeRevision::default();
        let cache = EligibleNodeCache::tracking(revision.clone());
        let step = |change: &dyn Fn(&MemoryNodeLister)| {
            change(&lister);
            revision.bump();
            cache.current(&lister)
        };
        let base = step(&|l| {
            l.insert(node("a", "fake://a"));
            l.insert(node("b", "fake://b"));
        });
        // A new version of a Node with the same name and provider ID: the same set.
        let mut relabelled = node("a", "fake://a");
        relabelled.metadata.labels = Some([("team".into(), "x".into())].into());
        let labels = step(&|l| l.insert(relabelled.clone()));
        assert!(!Arc::ptr_eq(&labels, &base), "new objects");
        assert!(labels.same_for_the_cloud(&base));
        assert_eq!(
            labels.generation, base.generation,
            "compared once, when built"
        );
        // A provider ID that changed, a Node excluded by label, a Node gone: different sets.
        let moved = step(&|l| l.insert(node("b", "fake://b-2")));
        assert!(!moved.same_for_the_cloud(&labels));
        let mut excluded = node("b", "fake://b-2");
        excluded.metadata.labels =
            Some([(EXCLUDE_FROM_LOAD_BALANCERS_LABEL.into(), "true".into())].into());
        let fewer = step(&|l| l.insert(excluded.clone()));
        assert_eq!(fewer.nodes().len(), 1);
        assert!(!fewer.same_for_the_cloud(&moved));
        // Back to the first pairs: a new generation, found equal by fingerprint and pairs.
        let back = step(&|l| l.insert(node("b", "fake://b")));
        assert_ne!(back.generation, base.generation);
        assert!(back.same_for_the_cloud(&base));
        assert!(!back.same_for_the_cloud(&fewer));
        // Every pair of sets built above agrees with upstream's rule.
        let sets = [&base, &labels, &moved, &fewer, &back];
        for a in sets {
            for b in sets {
                assert_eq!(
                    a.same_for_the_cloud(b),
                    nodes_sufficiently_equal(a.nodes(), b.nodes()),
                    "{:?} / {:?}",
                    pairs(a.nodes()),
                    pairs(b.nodes())
                );
            }
        }
    }

    #[test]
    fn the_order_of_the_cache_does_not_matter() {
        let a = Arc::new(node("a", "fake://a"));
        let b = Arc::new(node("b", "fake://b"));
        assert_eq!(
            fingerprint(&[a.clone(), b.clone()]),
            fingerprint(&[b.clone(), a.clone()])
        );
        assert!(same_pairs(&[a.clone(), b.clone()], &[b, a]));
    }
}
