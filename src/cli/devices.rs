//! `tessera devices`.

use super::CliError;
use tessera_runtime::{plugin_store, Device, DeviceKind, HEADER_API_VERSION};

pub fn run() -> Result<(), CliError> {
    println!(
        "{:<7} {:<9} {:<8} {:<8} plugin",
        "kind", "platform", "api", "devices"
    );
    for kind in DeviceKind::ALL {
        if kind == DeviceKind::Interp {
            println!(
                "{:<7} {:<9} {:<8} {:<8} (built in: the reference interpreter)",
                "interp", "-", "-", "1"
            );
            continue;
        }
        if plugin_store::locate(kind).is_err() {
            println!(
                "{:<7} {:<9} {:<8} {:<8} not installed (`tessera plugin install {kind}`)",
                kind.name(),
                "-",
                "-",
                "-"
            );
            continue;
        }
        if kind == DeviceKind::Tpu && !tessera_runtime::tpu_attached() {
            let path = plugin_store::locate(kind)
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            println!(
                "{:<7} {:<9} {:<8} {:<8} {path} (no TPU attached: compile-only, `tessera aot`)",
                "tpu", "-", "-", "0"
            );
            continue;
        }
        match Device::new(kind) {
            Ok(d) => {
                let c = d.client()?;
                let (major, minor) = c.plugin().api_version();
                println!(
                    "{:<7} {:<9} {:<8} {:<8} {}",
                    kind.name(),
                    c.platform_name(),
                    format!("{major}.{minor}"),
                    c.devices().len(),
                    d.plugin_path()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                );
                // What was loaded, byte for byte (compare with `sha256sum`).
                if let Some(path) = d.plugin_path() {
                    match plugin_store::sha256_file(path) {
                        Ok(h) => {
                            let pin = match plugin_store::is_pinned_plugin(kind, &h) {
                                Some(true) => " (the pinned plugin)",
                                Some(false) => " (not the pinned plugin)",
                                None => "",
                            };
                            println!("{:<35} sha256 {h}{pin}", "")
                        }
                        Err(e) => println!("{:<35} sha256 unavailable: {e}", ""),
                    }
                }
            }
            Err(e) => println!(
                "{:<7} {:<9} {:<8} {:<8} unavailable: {e}",
                kind.name(),
                "-",
                "-",
                "-"
            ),
        }
    }
    println!(
        "(bindings generated from PJRT C API {}.{})",
        HEADER_API_VERSION.0, HEADER_API_VERSION.1
    );
    Ok(())
}
