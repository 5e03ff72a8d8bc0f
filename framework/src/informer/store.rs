//! Owns [`Store`], a view's read handle on its informer's in-memory copy of every watched
//! object, and `Objects`, that copy and its indexes.
//!
//! Objects are kept in key order (`namespace/name`), so the namespace index every informer offers
//! is a range of the one map and costs no second copy of each key (a `HashSet` of keys per
//! namespace cost about 120 bytes an object). Readers take a short read lock and clone `Arc`s
//! out, so a lookup never waits for more than one store mutation and never for event delivery.
//! Only the informer's own tasks write, always while they hold the informer's dispatch lock,
//! which is what lets a late handler replay the store without a gap or a duplicate against later
//! deltas. Every view of a kind reads the same `Objects` through its [`Projection`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::RwLock;

use super::event::Event;
use super::key::ObjectKey;
use super::object::{Obj, Object};
use super::view::Projection;

/// Name of the index every informer registers, keyed by namespace (`""` for cluster-scoped
/// objects), like client-go's generated informers; lets controllers list one namespace cheaply.
pub const NAMESPACE_INDEX: &str = "namespace";

/// An index function: maps an object to the index values it is filed under.
pub(crate) type IndexFn = Arc<dyn Fn(&dyn Object) -> Vec<String> + Send + Sync>;

/// Shared read handle on an informer's cache, as objects of type `V`; controllers read it
/// instead of calling the API server, exactly like client-go listers.
pub struct Store<V> {
    objects: Objects,
    view: Arc<Projection<V>>,
}

impl<V> Clone for Store<V> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects.clone(),
            view: Arc::clone(&self.view),
        }
    }
}

impl<V> std::fmt::Debug for Store<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("len", &self.objects.len())
            .finish()
    }
}

#[cfg(test)]
impl<V: super::resource::CacheResource> Store<V> {
    /// A store of its own holding `objects`, for tests that need a lister and no informer.
    pub(crate) fn holding(objects: impl IntoIterator<Item = V>) -> Self {
        let store = Objects::new();
        for obj in objects {
            store.upsert(ObjectKey::from_object(&obj), super::object::stored(obj));
        }
        Store::new(store, Arc::new(Projection::new()))
    }
}

impl<V: Send + Sync + 'static> Store<V> {
    pub(crate) fn new(objects: Objects, view: Arc<Projection<V>>) -> Self {
        Store { objects, view }
    }

    /// Looks up one object by key; the `Arc` stays valid even if the object changes afterwards.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<V>> {
        let obj = self.objects.get(key)?;
        self.view.arc(&obj)
    }

    /// Looks up a cluster-scoped object (such as a Node) by name, the common case for the cloud
    /// controllers.
    pub fn get_by_name(&self, name: &str) -> Option<Arc<V>> {
        self.get(&ObjectKey::cluster(name))
    }

    /// Snapshots every cached object, e.g. to compute the node set for load balancers.
    pub fn list(&self) -> Vec<Arc<V>> {
        // Objects stored as `V`: one pass under the read lock and one `Arc` clone each, as
        // kube-runtime's `Store::state`; a webhook that reads the cache on every review pays it.
        if let Some(same) = self.objects.map_all(Projection::<V>::same) {
            return same;
        }
        self.project(self.objects.list())
    }

    /// Snapshots every cached key, for resync-style "enqueue everything" loops.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.objects.state.read().objects.keys().cloned().collect()
    }

    /// Lists the objects filed under `value` in index `index`, so controllers can answer
    /// "which services use this node" without scanning the whole cache.
    ///
    /// An unknown index yields an empty list (client-go returns an error instead).
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<V>> {
        self.project(self.objects.by_index(index, value))
    }

    /// Number of cached objects, for status reporting and tests.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether the cache holds nothing (also true before the first list completed).
    pub fn is_empty(&self) -> bool {
        self.objects.len() == 0
    }

    fn project(&self, objects: Vec<Obj>) -> Vec<Arc<V>> {
        objects.iter().filter_map(|o| self.view.arc(o)).collect()
    }
}

/// The objects of one informer and their indexes, whatever type they were watched as.
#[derive(Clone)]
pub(crate) struct Objects {
    state: Arc<RwLock<StoreState>>,
}

struct StoreState {
    /// In key order: the namespace index is a range of this map.
    objects: BTreeMap<ObjectKey, Obj>,
    /// The registered indexes other than [`NAMESPACE_INDEX`].
    indexers: HashMap<String, IndexFn>,
    /// index name -> index value -> keys filed under it
    indices: HashMap<String, HashMap<String, HashSet<ObjectKey>>>,
}

/// The first key of `namespace` (`None`: the cluster-scoped objects) in key order.
fn first_key(namespace: Option<&str>) -> ObjectKey {
    ObjectKey {
        namespace: namespace.map(str::to_string),
        name: String::new(),
    }
}

impl StoreState {
    /// The keys and objects of one namespace (`None`: the cluster-scoped ones), a range of the map.
    fn in_namespace(&self, namespace: Option<&str>) -> impl Iterator<Item = (&ObjectKey, &Obj)> {
        self.objects
            .range(first_key(namespace)..)
            .take_while(move |(key, _)| key.namespace.as_deref() == namespace)
    }

    fn unindex(&mut self, key: &ObjectKey, obj: &dyn Object) {
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

    fn index(&mut self, key: &ObjectKey, obj: &dyn Object) {
        for (name, f) in &self.indexers {
            let index = self.indices.entry(name.clone()).or_default();
            for value in f(obj) {
                index.entry(value).or_default().insert(key.clone());
            }
        }
    }
}

impl Objects {
    pub(crate) fn new() -> Self {
        Self {
            state: Arc::new(RwLock::new(StoreState {
                objects: BTreeMap::new(),
                indexers: HashMap::new(),
                indices: HashMap::new(),
            })),
        }
    }

    pub(crate) fn get(&self, key: &ObjectKey) -> Option<Obj> {
        self.state.read().objects.get(key).cloned()
    }

    pub(crate) fn list(&self) -> Vec<Obj> {
        self.state.read().objects.values().cloned().collect()
    }

    /// `f` of every object in key order, or `None` as soon as one gives `None`.
    pub(crate) fn map_all<T>(&self, f: impl FnMut(&Obj) -> Option<T>) -> Option<Vec<T>> {
        self.state.read().objects.values().map(f).collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.state.read().objects.len()
    }

    fn by_index(&self, index: &str, value: &str) -> Vec<Obj> {
        let state = self.state.read();
        if index == NAMESPACE_INDEX {
            let namespace = (!value.is_empty()).then_some(value);
            return state
                .in_namespace(namespace)
                .map(|(_, o)| Arc::clone(o))
                .collect();
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

    pub(crate) fn has_indexer(&self, name: &str) -> bool {
        name == NAMESPACE_INDEX || self.state.read().indexers.contains_key(name)
    }

    /// Registers an index; only called before the informer starts, so no objects need re-indexing,
    /// but any present are indexed anyway to keep the invariant local.
    pub(crate) fn add_indexer(&self, name: &str, f: IndexFn) {
        let mut state = self.state.write();
        state.indexers.insert(name.to_string(), Arc::clone(&f));
        let mut index: HashMap<String, HashSet<ObjectKey>> = HashMap::new();
        for (key, obj) in &state.objects {
            for value in f(obj.as_ref()) {
                index.entry(value).or_default().insert(key.clone());
            }
        }
        state.indices.insert(name.to_string(), index);
    }

    /// Inserts or replaces one object and says which event that is.
    pub(crate) fn upsert(&self, key: ObjectKey, obj: Obj) -> Event<dyn Object> {
        let mut state = self.state.write();
        let old = state.objects.insert(key.clone(), Arc::clone(&obj));
        if let Some(old) = &old {
            state.unindex(&key, old.as_ref());
        }
        state.index(&key, obj.as_ref());
        match old {
            Some(old) => Event::Updated { old, new: obj },
            None => Event::Added(obj),
        }
    }

    /// Removes one object, returning its last cached state if it was known.
    pub(crate) fn remove(&self, key: &ObjectKey) -> Option<Obj> {
        let mut state = self.state.write();
        let old = state.objects.remove(key)?;
        state.unindex(key, old.as_ref());
        Some(old)
    }

    /// Swaps the objects of `within` (one namespace, or every object with `None`) for a fresh
    /// list and returns the difference as events, so a relist (after a 410 Gone or a reconnect)
    /// tells handlers about objects that vanished meanwhile.
    ///
    /// Events follow client-go's `Replace`: every listed object in list order (Added if new,
    /// Updated otherwise, even when unchanged), then a Deleted for every object no longer listed.
    /// An object whose resourceVersion did not change keeps its old `Arc`, so old == new by
    /// pointer and no memory is duplicated.
    pub(crate) fn replace(
        &self,
        within: Option<&str>,
        listed: Vec<(ObjectKey, Obj)>,
    ) -> Vec<Event<dyn Object>> {
        let mut state = self.state.write();
        let mut old_objects = match within {
            None => std::mem::take(&mut state.objects),
            Some(ns) => {
                let keys: Vec<ObjectKey> = state
                    .in_namespace(Some(ns))
                    .map(|(k, _)| k.clone())
                    .collect();
                keys.into_iter()
                    .filter_map(|k| state.objects.remove_entry(&k))
                    .collect()
            }
        };
        let mut events = Vec::with_capacity(listed.len());
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
            state.objects.insert(key, Arc::clone(event.object()));
            events.push(event);
        }
        // In key order already (a BTreeMap).
        events.extend(old_objects.into_values().map(Event::Deleted));

        state.indices.clear();
        let entries: Vec<_> = state
            .objects
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        for (key, obj) in entries {
            state.index(&key, obj.as_ref());
        }
        events
    }
}

fn same_version(old: &dyn Object, new: &dyn Object) -> bool {
    match (old.resource_version(), new.resource_version()) {
        (Some(a), Some(b)) => !a.is_empty() && a == b,
        _ => false,
    }
}
