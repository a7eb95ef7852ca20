//! The executable cache: compile a module once per client, hit in microseconds afterwards.
//!
//! Each client owns one cache, so the plugin identity is part of the key by construction.
//! The key is a 64-bit FNV-1a hash of module text and compile options; a hit also compares the
//! stored text, so a hash collision can never return the wrong program.
//!
//! The cache is bounded: a loaded executable holds ~110 KB of resident memory on the CPU
//! plugin (measured over 2,000 distinct shapes), so an eager program that sees a new shape
//! every step would otherwise grow without end. Past its capacity the least recently used
//! entry is evicted (executables still held elsewhere live on until dropped).

use crate::compile_options::CompileOptions;
use crate::error::{Result, RuntimeError};
use crate::executable::Executable;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Entries kept when `TESSERA_EXECUTABLE_CACHE_SIZE` is unset: ~110 MB of executables at
/// most on the CPU plugin, more distinct (op, signature) pairs than a model's eager steps use.
pub const DEFAULT_CAPACITY: usize = 1024;

/// The env var that sets a new client's cache capacity (entries; 0 disables caching).
pub const CAPACITY_ENV: &str = "TESSERA_EXECUTABLE_CACHE_SIZE";

struct Entry {
    module: String,
    options: CompileOptions,
    exe: Arc<Executable>,
    /// The cache's clock at the last hit or insert.
    last_used: u64,
}

#[derive(Default)]
struct Entries {
    /// Entries sharing one hash.
    by_hash: HashMap<u64, Vec<Entry>>,
    len: usize,
    clock: u64,
}

impl Entries {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Removes least recently used entries until at most `keep` remain; returns how many.
    /// A linear scan per eviction: microseconds at the default capacity, next to a compile's
    /// tens of milliseconds (evictions happen only on misses).
    fn evict_to(&mut self, keep: usize) -> u64 {
        let mut evicted = 0;
        while self.len > keep {
            let Some((&hash, index)) = self
                .by_hash
                .iter()
                .flat_map(|(h, b)| {
                    b.iter()
                        .enumerate()
                        .map(move |(i, e)| ((h, i), e.last_used))
                })
                .min_by_key(|(_, used)| *used)
                .map(|(at, _)| at)
            else {
                break;
            };
            let bucket = self.by_hash.get_mut(&hash).expect("found above");
            bucket.swap_remove(index);
            if bucket.is_empty() {
                self.by_hash.remove(&hash);
            }
            self.len -= 1;
            evicted += 1;
        }
        evicted
    }
}

pub(crate) struct ExecutableCache {
    entries: Mutex<Entries>,
    capacity: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    compile_nanos: AtomicU64,
}

/// Counters of one client's executable cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
    /// Most entries kept (least recently used ones are evicted past it).
    pub capacity: usize,
    /// Entries dropped to stay within the capacity.
    pub evictions: u64,
    /// Total time spent compiling on misses.
    pub compile_time: Duration,
}

pub(crate) fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff; // separates parts so ("ab","c") != ("a","bc")
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The capacity `TESSERA_EXECUTABLE_CACHE_SIZE` asks for (default when unset or empty).
pub(crate) fn capacity_from_env() -> Result<usize> {
    match std::env::var(CAPACITY_ENV) {
        Ok(v) if !v.trim().is_empty() => {
            v.trim().parse::<usize>().map_err(|e| RuntimeError::BadEnv {
                var: CAPACITY_ENV,
                value: v.clone(),
                reason: format!(
                    "expected a number of cached executables (0 disables the cache): {e}"
                ),
            })
        }
        _ => Ok(DEFAULT_CAPACITY),
    }
}

impl ExecutableCache {
    pub(crate) fn new(capacity: usize) -> ExecutableCache {
        ExecutableCache {
            entries: Mutex::default(),
            capacity: AtomicU64::new(capacity as u64),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            compile_nanos: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed) as usize
    }

    /// Sets the capacity, evicting least recently used entries down to it at once.
    pub(crate) fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity as u64, Ordering::Relaxed);
        let evicted = self.lock().evict_to(capacity);
        self.evictions.fetch_add(evicted, Ordering::Relaxed);
    }

    pub(crate) fn get_or_compile(
        &self,
        module: &str,
        options: &CompileOptions,
        compile: impl FnOnce() -> Result<Executable>,
    ) -> Result<Arc<Executable>> {
        let key = fnv1a(&[module.as_bytes(), &options.to_proto_bytes()]);
        if let Some(exe) = self.lookup(key, module, options) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(exe);
        }
        // Compile outside the lock: other threads keep hitting while one compiles.
        let exe = Arc::new(compile()?);
        self.misses.fetch_add(1, Ordering::Relaxed);
        self.compile_nanos
            .fetch_add(exe.compile_time().as_nanos() as u64, Ordering::Relaxed);
        let capacity = self.capacity();
        if capacity == 0 {
            return Ok(exe);
        }
        let mut entries = self.lock();
        let now = entries.tick();
        let bucket = entries.by_hash.entry(key).or_default();
        // Another thread may have compiled the same module meanwhile: keep the first.
        if let Some(first) = bucket
            .iter_mut()
            .find(|e| e.module == module && e.options == *options)
        {
            first.last_used = now;
            return Ok(first.exe.clone());
        }
        bucket.push(Entry {
            module: module.to_string(),
            options: options.clone(),
            exe: exe.clone(),
            last_used: now,
        });
        entries.len += 1;
        let evicted = entries.evict_to(capacity);
        drop(entries);
        self.evictions.fetch_add(evicted, Ordering::Relaxed);
        Ok(exe)
    }

    fn lookup(&self, key: u64, module: &str, options: &CompileOptions) -> Option<Arc<Executable>> {
        let mut entries = self.lock();
        let now = entries.tick();
        let e = entries
            .by_hash
            .get_mut(&key)?
            .iter_mut()
            .find(|e| e.module == module && e.options == *options)?;
        e.last_used = now;
        Some(e.exe.clone())
    }

    pub(crate) fn stats(&self) -> CacheStats {
        let entries = self.lock().len;
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries,
            capacity: self.capacity(),
            evictions: self.evictions.load(Ordering::Relaxed),
            compile_time: Duration::from_nanos(self.compile_nanos.load(Ordering::Relaxed)),
        }
    }

    /// Drops every entry (not counted as evictions).
    pub(crate) fn clear(&self) {
        let mut entries = self.lock();
        entries.len = 0;
        entries.by_hash.clear();
    }
}
