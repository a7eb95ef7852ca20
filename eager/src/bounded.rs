//! The eager runtime's caches (lowered ops, fused programs), and the Python bridge's kernel
//! executables, keep at most [`cache_capacity`] entries each, least recently used out first. Each entry holds a compiled
//! executable, and an XLA CPU executable keeps ~3 memory mappings for as long as it lives: a
//! process that kept a program for every shape it ever ran reached `vm.max_map_count`
//! (65,530) after a few hundred zoo models, and XLA's compiler then failed ("Failed to
//! materialize symbols") or the process crashed.

use lru::LruCache;
use std::borrow::Borrow;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Entries per cache unless [`set_cache_capacity`] says otherwise (the runtime's executable
/// cache keeps as many).
pub const DEFAULT_CACHE_CAPACITY: usize = 1024;

static CAPACITY: AtomicUsize = AtomicUsize::new(DEFAULT_CACHE_CAPACITY);

/// Sets how many lowered ops and how many fused programs the eager runtime keeps (at least
/// one each); a call or graph evicted later lowers and compiles again.
pub fn set_cache_capacity(entries: usize) {
    CAPACITY.store(entries.max(1), Ordering::Relaxed);
}

/// How many lowered ops and how many fused programs the eager runtime keeps.
pub fn cache_capacity() -> usize {
    CAPACITY.load(Ordering::Relaxed)
}

/// A cache of at most [`cache_capacity`] entries, least recently used out first: the eager
/// runtime's (keyed structurally, `Vec<u64>`) and the Python bridge's kernel executables.
pub struct Bounded<K, V> {
    map: OnceLock<Mutex<LruCache<K, V>>>,
}

impl<K: Hash + Eq, V: Clone> Bounded<K, V> {
    pub const fn new() -> Self {
        Bounded {
            map: OnceLock::new(),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut LruCache<K, V>) -> R) -> R {
        let cap = NonZeroUsize::new(cache_capacity()).unwrap_or(NonZeroUsize::MIN);
        let map = self.map.get_or_init(|| Mutex::new(LruCache::new(cap)));
        let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
        if map.cap() != cap {
            map.resize(cap);
        }
        f(&mut map)
    }

    pub fn get<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.with(|m| m.get(key).cloned())
    }

    /// The entry under `key`: the one already there, else `value`, inserted.
    pub fn get_or_insert(&self, key: K, value: V) -> V {
        self.with(|m| m.get_or_insert(key, || value).clone())
    }

    pub fn insert(&self, key: K, value: V) {
        self.with(|m| m.put(key, value));
    }
}

impl<K: Hash + Eq, V: Clone> Default for Bounded<K, V> {
    fn default() -> Self {
        Self::new()
    }
}
