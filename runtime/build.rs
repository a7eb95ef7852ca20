//! Generates Rust bindings for the PJRT C API header at build time (never committed).
//!
//! The header comes from PyPI's `xla-cpu-pjrt` package. Where to find it, in order:
//! `PJRT_C_API_HEADER` (a path to `pjrt_c_api.h`), the project's `.venv` made by `make setup`,
//! the Tessera cache folder that `tessera plugin install cpu` fills, or the site-packages of
//! `python3`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const HEADER_IN_PACKAGE: &str = "xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h";

fn main() {
    println!("cargo:rerun-if-env-changed=PJRT_C_API_HEADER");
    println!("cargo:rerun-if-env-changed=TESSERA_CACHE_DIR");
    let header = find_header().unwrap_or_else(|searched| {
        panic!(
            "pjrt_c_api.h not found. Run `make setup` (it pip-installs xla-cpu-pjrt==0.0.1 into .venv), \
             or set PJRT_C_API_HEADER=/path/to/pjrt_c_api.h. Searched:\n  {}",
            searched.join("\n  ")
        )
    });
    println!("cargo:rerun-if-changed={}", header.display());
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .allowlist_type("PJRT_.*")
        .allowlist_var("PJRT_.*")
        .allowlist_function("GetPjrtApi")
        .default_enum_style(bindgen::EnumVariation::Rust {
            non_exhaustive: false,
        })
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen failed on pjrt_c_api.h");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("pjrt_bindings.rs");
    bindings.write_to_file(out).expect("writing bindings");
}

fn find_header() -> Result<PathBuf, Vec<String>> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = env::var_os("PJRT_C_API_HEADER") {
        candidates.push(PathBuf::from(p));
    }
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    if let Some(root) = manifest.parent() {
        candidates
            .extend(site_packages_under(&root.join(".venv")).map(|sp| sp.join(HEADER_IN_PACKAGE)));
    }
    if let Some(cache) = env::var_os("TESSERA_CACHE_DIR") {
        candidates.push(PathBuf::from(cache).join("plugins/cpu/pjrt_c_api.h"));
    }
    if let Ok(out) = Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ])
        .output()
    {
        let sp = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !sp.is_empty() {
            candidates.push(Path::new(&sp).join(HEADER_IN_PACKAGE));
        }
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| candidates.iter().map(|p| p.display().to_string()).collect())
}

fn site_packages_under(venv: &Path) -> impl Iterator<Item = PathBuf> {
    let lib = venv.join("lib");
    std::fs::read_dir(lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir())
}
