//! The executable cache: compile a module once per client, hit in microseconds afterwards.
//!
//! Each client owns one cache, so the plugin identity is part of the key by construction.
//! The key is a 64-bit FNV-1a hash of module text and compile options; a hit also compares the
//! stored text, so a hash collision can never return the wrong program.

use crate::compile_options::CompileOptions;
use crate::error::Result;
use crate::executable::Executable;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Entries sharing one hash: (module text, options, executable).
type Bucket = Vec<(String, CompileOptions, Arc<Executable>)>;

#[derive(Default)]
pub(crate) struct ExecutableCache {
    entries: Mutex<HashMap<u64, Bucket>>,
    hits: AtomicU64,
    misses: AtomicU64,
    compile_nanos: AtomicU64,
}

/// Counters of one client's executable cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
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

impl ExecutableCache {
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
        let mut map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let bucket = map.entry(key).or_default();
        // Another thread may have compiled the same module meanwhile: keep the first.
        if let Some((_, _, first)) = bucket.iter().find(|(m, o, _)| m == module && o == options) {
            return Ok(first.clone());
        }
        bucket.push((module.to_string(), options.clone(), exe.clone()));
        Ok(exe)
    }

    fn lookup(&self, key: u64, module: &str, options: &CompileOptions) -> Option<Arc<Executable>> {
        let map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&key)?
            .iter()
            .find(|(m, o, _)| m == module && o == options)
            .map(|(_, _, e)| e.clone())
    }

    pub(crate) fn stats(&self) -> CacheStats {
        let map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: map.values().map(Vec::len).sum(),
            compile_time: Duration::from_nanos(self.compile_nanos.load(Ordering::Relaxed)),
        }
    }

    pub(crate) fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}
