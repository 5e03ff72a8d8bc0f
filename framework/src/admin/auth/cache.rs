//! A small expiring cache for TokenReview and SubjectAccessReview answers, bounded like
//! upstream's (4096 entries); time is tokio's, so tests drive expiry with a paused clock.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Upstream's token and SAR caches hold at most this many entries.
const CAPACITY: usize = 4096;

/// Answers keyed by request, each kept for the TTL it was stored with.
#[derive(Debug)]
pub(crate) struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    pub(crate) fn new() -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The stored answer if it has not expired.
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock();
        match entries.get(key) {
            Some((expires, value)) if *expires > Instant::now() => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` for `ttl`; a zero TTL stores nothing.
    pub(crate) fn insert(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock();
        if entries.len() >= CAPACITY {
            entries.retain(|_, (expires, _)| *expires > now);
            if entries.len() >= CAPACITY
                && let Some(victim) = entries
                    .iter()
                    .min_by_key(|(_, (expires, _))| *expires)
                    .map(|(k, _)| k.clone())
            {
                entries.remove(&victim);
            }
        }
        entries.insert(key, (now + ttl, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn entries_live_for_their_ttl() {
        let cache = TtlCache::new();
        cache.insert("a", 1, Duration::from_secs(10));
        cache.insert("b", 2, Duration::ZERO);
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!((cache.get(&"a"), cache.get(&"b")), (Some(1), None));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(cache.get(&"a"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn full_cache_drops_the_soonest_to_expire() {
        let cache = TtlCache::new();
        for i in 0..CAPACITY {
            cache.insert(i, i, Duration::from_secs(100 + i as u64));
        }
        cache.insert(CAPACITY, CAPACITY, Duration::from_secs(1000));
        assert_eq!(cache.get(&0), None);
        assert_eq!(cache.get(&1), Some(1));
        assert_eq!(cache.get(&CAPACITY), Some(CAPACITY));
    }
}
