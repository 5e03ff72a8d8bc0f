//! Owns [`Store`], the informer's in-memory copy of every watched object and its indexes.
//!
//! Objects are kept in key order (`namespace/name`), so the namespace index every informer offers
//! is a range of the one map and costs no second copy of each key (a `HashSet` of keys per
//! namespace cost about 120 bytes an object). Readers take a short read lock and clone `Arc`s
//! out, so a lookup never waits for more than one store mutation and never for event delivery. Only the informer's own task writes, always while
//! it holds the informer's dispatch lock, which is what lets a late handler replay the store
//! without a gap or a duplicate against later deltas.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::RwLock;

use super::event::Event;
use super::key::ObjectKey;

/// Name of the index every informer registers, keyed by namespace (`""` for cluster-scoped
/// objects), like client-go's generated informers; lets controllers list one namespace cheaply.
pub const NAMESPACE_INDEX: &str = "namespace";

/// An index function: maps an object to the index values it is filed under.
pub(crate) type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Shared read handle on an informer's cache; controllers read it instead of calling the API
/// server, exactly like client-go listers.
pub struct Store<K> {
    state: Arc<RwLock<StoreState<K>>>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self {
            state: Arc::clone(&self.state),
        }
    }
}

impl<K> std::fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("len", &self.len()).finish()
    }
}

struct StoreState<K> {
    /// In key order: the namespace index is a range of this map.
    objects: BTreeMap<ObjectKey, Arc<K>>,
    /// The registered indexes other than [`NAMESPACE_INDEX`].
    indexers: HashMap<String, IndexFn<K>>,
    /// index name -> index value -> keys filed under it
    indices: HashMap<String, HashMap<String, HashSet<ObjectKey>>>,
}

impl<K> StoreState<K> {
    /// The objects of namespace `namespace` (`""`: the cluster-scoped ones), a range of the map.
    fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        let namespace = (!namespace.is_empty()).then(|| namespace.to_string());
        let from = ObjectKey {
            namespace: namespace.clone(),
            name: String::new(),
        };
        self.objects
            .range(from..)
            .take_while(|(key, _)| key.namespace == namespace)
            .map(|(_, obj)| Arc::clone(obj))
            .collect()
    }

    fn unindex(&mut self, key: &ObjectKey, obj: &K) {
        for (name, f) in &self.indexers {
            let Some(index) = self.indices.get_mut(name) else {
                continue;
            };
            for value in f(obj) {
                if let Some(keys) = index.get_mut(&value) {
                    keys.remove(key);
                    if keys.is_empty() {
                        index.remove(&value);
                    }
                }
            }
        }
    }

    fn index(&mut self, key: &ObjectKey, obj: &K) {
        for (name, f) in &self.indexers {
            let index = self.indices.entry(name.clone()).or_default();
            for value in f(obj) {
                index.entry(value).or_default().insert(key.clone());
            }
        }
    }
}

impl<K> Store<K> {
    /// Looks up one object by key; the `Arc` stays valid even if the object changes afterwards.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.state.read().objects.get(key).cloned()
    }

    /// Looks up a cluster-scoped object (such as a Node) by name, the common case for the cloud
    /// controllers.
    pub fn get_by_name(&self, name: &str) -> Option<Arc<K>> {
        self.get(&ObjectKey::cluster(name))
    }

    /// Snapshots every cached object, e.g. to compute the node set for load balancers.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.state.read().objects.values().cloned().collect()
    }

    /// Snapshots every cached key, for resync-style "enqueue everything" loops.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.state.read().objects.keys().cloned().collect()
    }

    /// Lists the objects filed under `value` in index `index`, so controllers can answer
    /// "which services use this node" without scanning the whole cache.
    ///
    /// An unknown index yields an empty list (client-go returns an error instead).
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        let state = self.state.read();
        if index == NAMESPACE_INDEX {
            return state.in_namespace(value);
        }
        let Some(keys) = state.indices.get(index).and_then(|idx| idx.get(value)) else {
            if !state.indexers.contains_key(index) {
                tracing::debug!(index, "lookup in an index that was never registered");
            }
            return Vec::new();
        };
        keys.iter()
            .filter_map(|k| state.objects.get(k).cloned())
            .collect()
    }

    /// Number of cached objects, for status reporting and tests.
    pub fn len(&self) -> usize {
        self.state.read().objects.len()
    }

    /// Whether the cache holds nothing (also true before the first list completed).
    pub fn is_empty(&self) -> bool {
        self.state.read().objects.is_empty()
    }
}

impl<K: kube::Resource> Store<K> {
    pub(crate) fn new() -> Self {
        Self {
            state: Arc::new(RwLock::new(StoreState {
                objects: BTreeMap::new(),
                indexers: HashMap::new(),
                indices: HashMap::new(),
            })),
        }
    }

    pub(crate) fn has_indexer(&self, name: &str) -> bool {
        name == NAMESPACE_INDEX || self.state.read().indexers.contains_key(name)
    }

    /// Registers an index; only called before the informer starts, so no objects need re-indexing,
    /// but any present are indexed anyway to keep the invariant local.
    pub(crate) fn add_indexer(&self, name: &str, f: IndexFn<K>) {
        let mut state = self.state.write();
        state.indexers.insert(name.to_string(), Arc::clone(&f));
        let mut index: HashMap<String, HashSet<ObjectKey>> = HashMap::new();
        for (key, obj) in &state.objects {
            for value in f(obj) {
                index.entry(value).or_default().insert(key.clone());
            }
        }
        state.indices.insert(name.to_string(), index);
    }

    /// Inserts or replaces one object and says which event that is.
    pub(crate) fn upsert(&self, key: ObjectKey, obj: Arc<K>) -> Event<K> {
        let mut state = self.state.write();
        let old = state.objects.insert(key.clone(), Arc::clone(&obj));
        if let Some(old) = &old {
            state.unindex(&key, old);
        }
        state.index(&key, &obj);
        match old {
            Some(old) => Event::Updated { old, new: obj },
            None => Event::Added(obj),
        }
    }

    /// Removes one object, returning its last cached state if it was known.
    pub(crate) fn remove(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let mut state = self.state.write();
        let old = state.objects.remove(key)?;
        state.unindex(key, &old);
        Some(old)
    }

    /// Swaps the whole cache for a fresh list and returns the difference as events, so a relist
    /// (after a 410 Gone or a reconnect) tells handlers about objects that vanished meanwhile.
    ///
    /// Events follow client-go's `Replace`: every listed object in list order (Added if new,
    /// Updated otherwise, even when unchanged), then a Deleted for every object no longer listed.
    /// An object whose resourceVersion did not change keeps its old `Arc`, so old == new by
    /// pointer and no memory is duplicated.
    pub(crate) fn replace(&self, listed: Vec<(ObjectKey, Arc<K>)>) -> Vec<Event<K>> {
        let mut state = self.state.write();
        let mut old_objects = std::mem::take(&mut state.objects);
        let mut events = Vec::with_capacity(listed.len());
        let mut objects = BTreeMap::new();
        for (key, new) in listed {
            let event = match old_objects.remove(&key) {
                Some(old) if same_version(old.as_ref(), new.as_ref()) => Event::Updated {
                    old: Arc::clone(&old),
                    new: old,
                },
                Some(old) => Event::Updated { old, new },
                None => Event::Added(new),
            };
            // A duplicate key in one list: the later copy wins, as in client-go.
            objects.insert(key, Arc::clone(event.object()));
            events.push(event);
        }
        let mut vanished: Vec<_> = old_objects.into_iter().collect();
        vanished.sort_by(|a, b| a.0.cmp(&b.0));
        events.extend(vanished.into_iter().map(|(_, old)| Event::Deleted(old)));

        state.objects = objects;
        state.indices.clear();
        let entries: Vec<_> = state
            .objects
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        for (key, obj) in entries {
            state.index(&key, &obj);
        }
        events
    }
}

fn same_version<K: kube::Resource>(old: &K, new: &K) -> bool {
    match (
        old.meta().resource_version.as_deref(),
        new.meta().resource_version.as_deref(),
    ) {
        (Some(a), Some(b)) => !a.is_empty() && a == b,
        _ => false,
    }
}
