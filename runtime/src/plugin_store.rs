//! Where PJRT plugins live on this machine, and `tessera plugin install <kind>`.
//!
//! A plugin for device kind `k` is found through `TESSERA_PJRT_PLUGIN_<K>`, else in the cache
//! folder (`TESSERA_CACHE_DIR`, else the XDG cache dir + `tessera`) under `plugins/<k>/`.
//! `install` fills that folder from PyPI: `pip download` of the plugin's wheel (the only
//! network access), then the plugin file is unpacked from the wheel. Each wheel is pinned by
//! file name and sha256 (computed here from the wheels pip downloaded on 2026-12-01): pip is
//! told the exact wheel tags to fetch, and a download whose hash differs is refused before
//! anything is unpacked, so a changed upload on the index cannot change what Tessera loads.

use crate::device::DeviceKind;
use crate::error::{Result, RuntimeError};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One exact wheel: its file name, the tags pip needs to fetch that file on any machine,
/// and its sha256.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PinnedWheel {
    pub file: &'static str,
    /// `--platform`, `--python-version`, `--implementation`, `--abi` of `pip download`.
    pub platform: &'static str,
    pub python_version: &'static str,
    pub implementation: &'static str,
    pub abi: &'static str,
    /// Lowercase hex.
    pub sha256: &'static str,
    /// The sha256 of the plugin file inside it (what `tessera devices` compares with).
    pub plugin_sha256: &'static str,
}

/// What PyPI package carries a kind's plugin, and where in the wheel.
#[derive(Clone, Copy, Debug)]
pub struct PluginPackage {
    pub kind: DeviceKind,
    /// A pip requirement.
    pub requirement: &'static str,
    /// The wheel installed on x86-64 Linux; `None`: no verified wheel is recorded, and
    /// `install` refuses.
    pub wheel: Option<PinnedWheel>,
    /// The plugin's file name inside the wheel (matched at the end of the entry's path).
    pub file_in_wheel: &'static str,
    /// Extra files unpacked beside it (the C API header for the CPU plugin).
    pub extras: &'static [&'static str],
}

pub const PACKAGES: [PluginPackage; 3] = [
    PluginPackage {
        kind: DeviceKind::Cpu,
        requirement: "xla-cpu-pjrt==0.0.1",
        wheel: Some(PinnedWheel {
            file: "xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl",
            platform: "manylinux_2_27_x86_64",
            python_version: "3.11",
            implementation: "cp",
            abi: "cp311",
            sha256: "55837b6b7b47daa717f2d9a5a03563ea0ceaa338d06a81a1e2d3f060d960decc",
            plugin_sha256: "88c3f28c5900f48ad4a82cab9e79bba9537809743395e341485f8794268820dc",
        }),
        file_in_wheel: "xla_cpu_pjrt/xla_cpu_pjrt.so",
        extras: &["xla_cpu_pjrt/include/pjrt_c_api.h"],
    },
    PluginPackage {
        kind: DeviceKind::Tpu,
        requirement: "libtpu==0.0.52",
        wheel: Some(PinnedWheel {
            file: "libtpu-0.0.52-cp311-cp311-manylinux_2_31_x86_64.whl",
            platform: "manylinux_2_31_x86_64",
            python_version: "3.11",
            implementation: "cp",
            abi: "cp311",
            sha256: "f5e2e596eaea9357fbb5a6755a7a9007c6ab75bfde4a55191b03eff402971140",
            plugin_sha256: "f86de4d04a058e6b5101f73e0824b95f27e2cec996d2b9191d9cffda75c03077",
        }),
        file_in_wheel: "libtpu/libtpu.so",
        extras: &[],
    },
    PluginPackage {
        kind: DeviceKind::Cuda,
        requirement: "jax-cuda13-pjrt",
        // Not verified on any machine here (no GPU): nothing to pin it to yet.
        wheel: None,
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

/// The largest wheel `verify_wheel` hashes (the pinned ones: 63 MB and 137 MB).
const MAX_WHEEL_BYTES: u64 = 4 << 30;

/// The sha256 of a file, in lowercase hex (streamed: plugins are hundreds of MB).
pub fn sha256_file(path: &Path) -> io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut file = fs::File::open(path)?;
    let mut hasher = Sha256::new();
    io::copy(&mut file, &mut hasher)?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The pinned wheel of `pkg` for this machine, or why there is none.
fn pinned(pkg: &PluginPackage) -> std::result::Result<PinnedWheel, String> {
    let wheel = pkg.wheel.ok_or_else(|| {
        format!(
            "no verified wheel (exact file and sha256) is recorded for `{}`, so Tessera will not install it; install the plugin yourself and point {} at its .so",
            pkg.requirement,
            env_var_for(pkg.kind)
        )
    })?;
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return Err(format!(
            "the pinned wheel of `{}` is {}, for x86-64 Linux, not this machine; install the plugin yourself and point {} at its .so",
            pkg.requirement,
            wheel.file,
            env_var_for(pkg.kind)
        ));
    }
    Ok(wheel)
}

/// Whether a plugin file hash is the pinned plugin of `kind` (`None`: nothing is pinned).
pub fn is_pinned_plugin(kind: DeviceKind, sha256: &str) -> Option<bool> {
    let wheel = package_for(kind)?.wheel?;
    Some(wheel.plugin_sha256 == sha256)
}

/// Checks a wheel file against the pinned sha256 of `kind`'s package.
pub fn verify_wheel(kind: DeviceKind, wheel: &Path) -> Result<()> {
    let err = |detail: String| RuntimeError::Install {
        kind: kind.name().into(),
        detail,
    };
    let pkg = package_for(kind).ok_or_else(|| err("this device kind has no PJRT plugin".into()))?;
    let pin = pinned(pkg).map_err(err)?;
    // Hash only a regular file of plausible size: `/dev/zero` would be read forever.
    let meta = fs::metadata(wheel)
        .map_err(|e| RuntimeError::io(format!("reading {}", wheel.display()), e))?;
    if !meta.is_file() || meta.len() > MAX_WHEEL_BYTES {
        return Err(err(format!(
            "{} is not a wheel file (a regular file of at most {MAX_WHEEL_BYTES} bytes)",
            wheel.display()
        )));
    }
    let got = sha256_file(wheel)
        .map_err(|e| RuntimeError::io(format!("hashing {}", wheel.display()), e))?;
    if got != pin.sha256 {
        return Err(err(format!(
            "sha256 mismatch for {}: expected {} (the pinned {}), got {got}; refusing to install it",
            wheel.display(),
            pin.sha256,
            pin.file
        )));
    }
    Ok(())
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
    let pin = pinned(pkg).map_err(err)?;
    let dir = target
        .parent()
        .expect("install path has a parent")
        .to_path_buf();
    fs::create_dir_all(&dir)
        .map_err(|e| RuntimeError::io(format!("creating {}", dir.display()), e))?;
    let download = dir.join("download");
    let _ = fs::remove_dir_all(&download);
    let python = std::env::var("TESSERA_PYTHON").unwrap_or_else(|_| "python3".into());
    // The pinned wheel's own tags: pip fetches that file whatever Python runs it.
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            pin.platform,
            "--python-version",
            pin.python_version,
            "--implementation",
            pin.implementation,
            "--abi",
            pin.abi,
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
    let wheel = download.join(pin.file);
    if !wheel.is_file() {
        return Err(err(format!(
            "pip did not download the pinned wheel {} into {}",
            pin.file,
            download.display()
        )));
    }
    let installed = install_wheel(kind, &wheel, &target);
    let _ = fs::remove_dir_all(&download);
    installed
}

/// Installs the plugin for `kind` from a wheel file already on disk (machines without
/// network access); the wheel must be the pinned one.
pub fn install_from_wheel(kind: DeviceKind, wheel: &Path) -> Result<PathBuf> {
    let target = installed_path(kind).ok_or_else(|| RuntimeError::Install {
        kind: kind.name().into(),
        detail: "this device kind has no PJRT plugin".into(),
    })?;
    let dir = target.parent().expect("install path has a parent");
    fs::create_dir_all(dir)
        .map_err(|e| RuntimeError::io(format!("creating {}", dir.display()), e))?;
    install_wheel(kind, wheel, &target)
}

/// Verifies `wheel`, then unpacks the plugin (and its extras) to `target`'s folder.
fn install_wheel(kind: DeviceKind, wheel: &Path, target: &Path) -> Result<PathBuf> {
    let err = |detail: String| RuntimeError::Install {
        kind: kind.name().into(),
        detail,
    };
    verify_wheel(kind, wheel)?;
    let pkg = package_for(kind).expect("verified above");
    let dir = target.parent().expect("install path has a parent");
    unpack(wheel, pkg.file_in_wheel, target)
        .map_err(|e| err(format!("unpacking {}: {e}", wheel.display())))?;
    for extra in pkg.extras {
        let name = Path::new(extra).file_name().expect("extra has a file name");
        unpack(wheel, extra, &dir.join(name))
            .map_err(|e| err(format!("unpacking {extra}: {e}")))?;
    }
    Ok(target.to_path_buf())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_text() {
        let dir = tempfile::Builder::new()
            .prefix("tessera-sha-")
            .tempdir()
            .unwrap();
        let f = dir.path().join("abc");
        fs::write(&f, b"abc").unwrap();
        // FIPS 180-2, appendix B.1.
        assert_eq!(
            sha256_file(&f).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let err = verify_wheel(DeviceKind::Cpu, &f).unwrap_err().to_string();
        assert!(err.contains("sha256 mismatch"), "{err}");
        assert!(err.contains("55837b6b7b47daa7"), "{err}");
        let err = verify_wheel(DeviceKind::Cuda, &f).unwrap_err().to_string();
        assert!(err.contains("no verified wheel"), "{err}");
        assert_eq!(is_pinned_plugin(DeviceKind::Cuda, "00"), None);
        let err = verify_wheel(DeviceKind::Cpu, Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a wheel file"), "{err}");
    }

    #[test]
    fn every_pin_is_an_exact_version_and_a_full_hash() {
        for p in PACKAGES.iter().filter(|p| p.wheel.is_some()) {
            let w = p.wheel.unwrap();
            let version = p.requirement.split_once("==").expect("pinned version").1;
            assert!(w.file.contains(&format!("-{version}-")), "{}", w.file);
            assert_eq!(w.sha256.len(), 64);
            assert_eq!(w.plugin_sha256.len(), 64);
            assert_eq!(is_pinned_plugin(p.kind, w.plugin_sha256), Some(true));
            assert_eq!(is_pinned_plugin(p.kind, w.sha256), Some(false));
            assert!(w
                .sha256
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        }
    }
}
