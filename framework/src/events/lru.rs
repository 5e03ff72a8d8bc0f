//! A small bounded map that evicts the least recently used entry, like the `golang-lru` caches
//! client-go's correlator uses (4096 entries each), so memory stays bounded for long-lived processes.

use std::collections::HashMap;
use std::hash::Hash;

/// Bounded map; `get_mut` and `insert` count as uses.
#[derive(Debug)]
pub(crate) struct Lru<K, V> {
    capacity: usize,
    tick: u64,
    entries: HashMap<K, (u64, V)>,
}

impl<K: Eq + Hash + Clone, V> Lru<K, V> {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            tick: 0,
            entries: HashMap::new(),
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let tick = self.next_tick();
        self.entries.get_mut(key).map(|(t, v)| {
            *t = tick;
            v
        })
    }

    pub fn insert(&mut self, key: K, value: V) {
        let tick = self.next_tick();
        self.make_room_for(&key);
        self.entries.insert(key, (tick, value));
    }

    /// Returns the entry for `key`, inserting `make()` first if absent.
    pub fn get_or_insert_with(&mut self, key: &K, make: impl FnOnce() -> V) -> &mut V {
        let tick = self.next_tick();
        self.make_room_for(key);
        let slot = self
            .entries
            .entry(key.clone())
            .or_insert_with(|| (tick, make()));
        slot.0 = tick;
        &mut slot.1
    }

    fn make_room_for(&mut self, key: &K) {
        if self.entries.contains_key(key) || self.entries.len() < self.capacity {
            return;
        }
        let oldest = self
            .entries
            .iter()
            .min_by_key(|(_, (t, _))| *t)
            .map(|(k, _)| k.clone());
        if let Some(oldest) = oldest {
            self.entries.remove(&oldest);
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used() {
        let mut lru = Lru::new(2);
        lru.insert("a", 1);
        lru.insert("b", 2);
        assert_eq!(lru.get_mut(&"a"), Some(&mut 1));
        lru.insert("c", 3);
        assert_eq!(lru.len(), 2);
        assert!(lru.get_mut(&"b").is_none(), "b was least recently used");
        assert_eq!(*lru.get_or_insert_with(&"a", || 9), 1);
        assert_eq!(*lru.get_or_insert_with(&"d", || 4), 4);
        assert!(lru.get_mut(&"c").is_none());
    }
}
