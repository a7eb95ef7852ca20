//! The on-disk tuning cache: one JSON file per key under `<cache dir>/autotune/`.
//!
//! The file name is the kernel name plus a hash of the whole key; the file repeats the key,
//! and a file whose key differs (another Tessera, plugin or space: a "foreign" file) or that
//! does not parse is ignored and overwritten by the next tune, never an error.

use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Bumped when the file layout or a field's meaning changes: older files then read as
/// foreign. 2: `space_size` counts feasible configs, not the whole product. 3: the key
/// names the StableHLO form; scores are medians of undisturbed runs.
const FORMAT: u32 = 3;

/// Everything a tuned result depends on.
///
/// Tunables are abstracted by hashing the kernel's program *traced at the default config*
/// (body IR, index maps, operand dtypes and shapes): that changes when the kernel or its
/// launch changes, but not with the config being tried. The space's description is part of
/// the key too, so widening the candidates re-tunes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheKey {
    pub kernel: String,
    /// `KernelProgram::structural_hash` of the default config's program, in hex.
    pub program_hash: String,
    /// `Space::describe`.
    pub space: String,
    /// Input arrays, `f32[256,256]` each.
    pub inputs: Vec<String>,
    /// Device kind (`cpu`, `tpu`, ...).
    pub device: String,
    /// The StableHLO form candidates were compiled in (`Auto`, `GridLoop`, ...).
    pub form: String,
    /// The plugin's platform version.
    pub platform_version: String,
    /// The plugin's PJRT C API version, `major.minor`.
    pub pjrt_api: String,
    /// `CARGO_PKG_VERSION` of tessera-runtime.
    pub tessera_version: String,
}

impl CacheKey {
    /// A stable 64-bit FNV-1a hash of every field (for the file name).
    pub fn hash(&self) -> u64 {
        let text = serde_json::to_string(self).unwrap_or_default();
        text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }

    /// `<dir>/autotune/<kernel>-<hash>.json`.
    pub fn path(&self, cache_dir: &Path) -> PathBuf {
        let safe: String = self
            .kernel
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        cache_dir
            .join("autotune")
            .join(format!("{safe}-{:016x}.json", self.hash()))
    }
}

/// One evaluated config, as stored (for reports and plots on a cache hit).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredEvaluation {
    pub config: String,
    /// Milliseconds of its median undisturbed run (the search's score), when it ran and
    /// was right.
    pub ms: Option<f64>,
    /// `ok`, `failed: ...` or `rejected: ...`.
    pub outcome: String,
}

/// A tuning result on disk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    pub format: u32,
    pub key: CacheKey,
    pub strategy: String,
    pub best_config: String,
    pub best_ms: f64,
    pub default_config: String,
    pub default_ms: f64,
    /// Feasible configs (those passing the constraints).
    pub space_size: usize,
    pub evaluations: Vec<StoredEvaluation>,
}

impl CacheEntry {
    pub fn new(
        key: CacheKey,
        strategy: String,
        best: (String, f64),
        default: (String, f64),
        space_size: usize,
        evaluations: Vec<StoredEvaluation>,
    ) -> CacheEntry {
        CacheEntry {
            format: FORMAT,
            key,
            strategy,
            best_config: best.0,
            best_ms: best.1,
            default_config: default.0,
            default_ms: default.1,
            space_size,
            evaluations,
        }
    }
}

/// Why a cache file was not used (for logs; never an error to the caller).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Miss {
    Absent,
    Corrupt(String),
    Foreign,
}

/// The entry stored for `key`, or why there is none usable.
pub fn load(key: &CacheKey, cache_dir: &Path) -> Result<CacheEntry, Miss> {
    let text = match fs::read_to_string(key.path(cache_dir)) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Miss::Absent),
        Err(e) => return Err(Miss::Corrupt(e.to_string())),
    };
    let entry: CacheEntry =
        serde_json::from_str(&text).map_err(|e| Miss::Corrupt(e.to_string()))?;
    if entry.format != FORMAT || entry.key != *key {
        return Err(Miss::Foreign);
    }
    Ok(entry)
}

/// Writes `entry` atomically: a temporary file in the same folder, then a rename, so a
/// reader never sees half a file and concurrent tuners leave one whole winner.
pub fn store(entry: &CacheEntry, cache_dir: &Path) -> std::io::Result<PathBuf> {
    let path = entry.key.path(cache_dir);
    let dir = path.parent().unwrap_or(cache_dir);
    fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
    let text = serde_json::to_string_pretty(entry).map_err(std::io::Error::other)?;
    let mut f = fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    fs::rename(&tmp, &path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(version: &str) -> CacheKey {
        CacheKey {
            kernel: "k".into(),
            program_hash: "ab".into(),
            space: "b=[1, 2]".into(),
            inputs: vec!["f32[8]".into()],
            device: "cpu".into(),
            form: "Auto".into(),
            platform_version: "p".into(),
            pjrt_api: "0.81".into(),
            tessera_version: version.into(),
        }
    }

    #[test]
    fn stores_loads_and_ignores_foreign_or_corrupt_files() {
        let temp = tempfile::Builder::new()
            .prefix("tessera-autotune-cache-")
            .tempdir()
            .unwrap();
        // A directory `store` has to create.
        let dir = temp.path().join("cache");
        let entry = CacheEntry::new(
            key("1"),
            "exhaustive".into(),
            ("b=1".into(), 1.0),
            ("b=2".into(), 2.0),
            2,
            Vec::new(),
        );
        let path = store(&entry, &dir).unwrap();
        assert_eq!(load(&key("1"), &dir), Ok(entry.clone()));
        // Same file name, other version inside: foreign.
        let mut foreign = entry.clone();
        foreign.key.tessera_version = "0".into();
        fs::write(&path, serde_json::to_string(&foreign).unwrap()).unwrap();
        assert_eq!(load(&key("1"), &dir), Err(Miss::Foreign));
        fs::write(&path, "{ not json").unwrap();
        assert!(matches!(load(&key("1"), &dir), Err(Miss::Corrupt(_))));
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(load(&key("1"), &dir), Err(Miss::Absent));
    }
}
