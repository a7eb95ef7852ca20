//! `tessera plugin install <kind>` and `tessera plugin list`.

use super::CliError;
use clap::Subcommand;
use tessera_runtime::{plugin_store, DeviceKind};

#[derive(Subcommand)]
pub enum PluginAction {
    /// Download the plugin's pinned wheel from PyPI (pip), check its sha256 and unpack it
    /// into the cache folder.
    Install {
        /// cpu, tpu or cuda
        kind: String,
        /// Reinstall even if present.
        #[arg(long)]
        force: bool,
        /// Install from this wheel file instead of downloading (it must be the pinned wheel:
        /// its sha256 is checked).
        #[arg(long)]
        wheel: Option<std::path::PathBuf>,
    },
    /// Show each plugin kind, its PyPI package and where it is installed.
    List,
}

pub fn run(action: PluginAction) -> Result<(), CliError> {
    match action {
        PluginAction::Install { kind, force, wheel } => {
            let kind = DeviceKind::parse(&kind)?;
            let path = match wheel {
                Some(w) => plugin_store::install_from_wheel(kind, &w)?,
                None => plugin_store::install(kind, force)?,
            };
            println!("{kind} plugin: {}", path.display());
        }
        PluginAction::List => {
            println!("cache folder: {}", plugin_store::cache_dir().display());
            for e in plugin_store::list() {
                let where_ = match &e.location {
                    Ok(p) => p.display().to_string(),
                    Err(_) => "not installed".to_string(),
                };
                println!("{:<5} {:<24} {}", e.kind.name(), e.requirement, where_);
                match plugin_store::package_for(e.kind).and_then(|p| p.wheel) {
                    Some(w) => println!("      pinned: {} sha256 {}", w.file, w.sha256),
                    None => println!("      pinned: no verified wheel (install refused)"),
                }
            }
        }
    }
    Ok(())
}
