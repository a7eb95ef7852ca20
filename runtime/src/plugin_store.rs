//! Where PJRT plugins live on this machine, and `tessera plugin install <kind>`.
//!
//! A plugin for device kind `k` is found through `TESSERA_PJRT_PLUGIN_<K>`, else in the cache
//! folder (`TESSERA_CACHE_DIR`, else the XDG cache dir + `tessera`) under `plugins/<k>/`.
//! `install` fills that folder from PyPI: `pip download` of the plugin's wheel (the only
//! network access), then the plugin file is unpacked from the wheel.

use crate::device::DeviceKind;
use crate::error::{Result, RuntimeError};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What PyPI package carries a kind's plugin, and where in the wheel.
#[derive(Clone, Copy, Debug)]
pub struct PluginPackage {
    pub kind: DeviceKind,
    /// A pip requirement.
    pub requirement: &'static str,
    /// The plugin's file name inside the wheel (matched at the end of the entry's path).
    pub file_in_wheel: &'static str,
    /// Extra files unpacked beside it (the C API header for the CPU plugin).
    pub extras: &'static [&'static str],
}

pub const PACKAGES: [PluginPackage; 3] = [
    PluginPackage {
        kind: DeviceKind::Cpu,
        requirement: "xla-cpu-pjrt==0.0.1",
        file_in_wheel: "xla_cpu_pjrt/xla_cpu_pjrt.so",
        extras: &["xla_cpu_pjrt/include/pjrt_c_api.h"],
    },
    PluginPackage {
        kind: DeviceKind::Tpu,
        requirement: "libtpu==0.0.52",
        file_in_wheel: "libtpu/libtpu.so",
        extras: &[],
    },
    PluginPackage {
        kind: DeviceKind::Cuda,
        requirement: "jax-cuda13-pjrt",
        file_in_wheel: "xla_cuda_plugin.so",
        extras: &[],
    },
];

pub fn package_for(kind: DeviceKind) -> Option<&'static PluginPackage> {
    PACKAGES.iter().find(|p| p.kind == kind)
}

/// The cache folder: `TESSERA_CACHE_DIR`, else `$XDG_CACHE_HOME/tessera` (`~/.cache/tessera`).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("TESSERA_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| dirs::cache_dir().map(|d| d.join("tessera")))
        .unwrap_or_else(|| PathBuf::from(".tessera-cache"))
}

pub fn env_var_for(kind: DeviceKind) -> String {
    format!("TESSERA_PJRT_PLUGIN_{}", kind.name().to_uppercase())
}

fn installed_path(kind: DeviceKind) -> Option<PathBuf> {
    let pkg = package_for(kind)?;
    let name = Path::new(pkg.file_in_wheel).file_name()?;
    Some(cache_dir().join("plugins").join(kind.name()).join(name))
}

/// Finds the plugin for `kind`, or says how to install it.
pub fn locate(kind: DeviceKind) -> Result<PathBuf> {
    let var = env_var_for(kind);
    if let Some(p) = std::env::var_os(&var) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(RuntimeError::PluginNotFound {
                kind: kind.name().into(),
                env_var: var,
                detail: format!("{} (from the env var) does not exist", p.display()),
            })
        };
    }
    match installed_path(kind) {
        Some(p) if p.is_file() => Ok(p),
        Some(p) => Err(RuntimeError::PluginNotFound {
            kind: kind.name().into(),
            env_var: var,
            detail: format!(
                "{} is not set and {} does not exist",
                env_var_for(kind),
                p.display()
            ),
        }),
        None => Err(RuntimeError::PluginNotFound {
            kind: kind.name().into(),
            env_var: var,
            detail: "this device kind has no PJRT plugin".into(),
        }),
    }
}

/// One installed (or missing) plugin, for `tessera plugin list`.
#[derive(Debug)]
pub struct PluginEntry {
    pub kind: DeviceKind,
    pub requirement: &'static str,
    pub location: Result<PathBuf>,
}

pub fn list() -> Vec<PluginEntry> {
    PACKAGES
        .iter()
        .map(|p| PluginEntry {
            kind: p.kind,
            requirement: p.requirement,
            location: locate(p.kind),
        })
        .collect()
}

/// Installs the plugin for `kind` into the cache folder; returns its path. A plugin already
/// there is kept unless `force`.
pub fn install(kind: DeviceKind, force: bool) -> Result<PathBuf> {
    let err = |detail: String| RuntimeError::Install {
        kind: kind.name().into(),
        detail,
    };
    let pkg = package_for(kind).ok_or_else(|| err("this device kind has no PJRT plugin".into()))?;
    let target = installed_path(kind).ok_or_else(|| err("no install location".into()))?;
    if target.is_file() && !force {
        return Ok(target);
    }
    let dir = target
        .parent()
        .expect("install path has a parent")
        .to_path_buf();
    fs::create_dir_all(&dir)
        .map_err(|e| RuntimeError::io(format!("creating {}", dir.display()), e))?;
    let download = dir.join("download");
    let _ = fs::remove_dir_all(&download);
    let python = std::env::var("TESSERA_PYTHON").unwrap_or_else(|_| "python3".into());
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--dest",
        ])
        .arg(&download)
        .arg(pkg.requirement)
        .status()
        .map_err(|e| err(format!("running `{python} -m pip`: {e}")))?;
    if !status.success() {
        return Err(err(format!(
            "`{python} -m pip download {}` failed ({status})",
            pkg.requirement
        )));
    }
    let wheel = fs::read_dir(&download)
        .map_err(|e| RuntimeError::io("reading the download folder", e))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| err("pip downloaded no wheel".into()))?;
    unpack(&wheel, pkg.file_in_wheel, &target)
        .map_err(|e| err(format!("unpacking {}: {e}", wheel.display())))?;
    for extra in pkg.extras {
        let name = Path::new(extra).file_name().expect("extra has a file name");
        unpack(&wheel, extra, &dir.join(name))
            .map_err(|e| err(format!("unpacking {extra}: {e}")))?;
    }
    let _ = fs::remove_dir_all(&download);
    Ok(target)
}

/// Copies the wheel entry whose path ends with `suffix` to `dest`, atomically (tmp + rename).
fn unpack(wheel: &Path, suffix: &str, dest: &Path) -> io::Result<()> {
    let file = fs::File::open(wheel)?;
    let mut zip = zip::ZipArchive::new(file).map_err(io::Error::other)?;
    let name = zip
        .file_names()
        .find(|n| n.ends_with(suffix))
        .map(str::to_string)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no `{suffix}` in the wheel"),
            )
        })?;
    let mut entry = zip.by_name(&name).map_err(io::Error::other)?;
    let tmp = dest.with_extension("partial");
    let mut out = fs::File::create(&tmp)?;
    io::copy(&mut entry, &mut out)?;
    out.sync_all()?;
    fs::rename(&tmp, dest)
}
