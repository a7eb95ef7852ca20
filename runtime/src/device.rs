//! Devices: what a user launches on. `Device::cpu()` is the default; `TESSERA_DEVICE` selects.

use crate::client::{Client, ClientOption};
use crate::error::{Result, RuntimeError};
use crate::plugin::Plugin;
use crate::plugin_store;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use tessera_lowering::backend::Target;
use tessera_lowering::mosaic::TpuGeneration;

/// The kinds of device Tessera runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The XLA CPU PJRT plugin.
    Cpu,
    /// libtpu with a TPU attached.
    Tpu,
    /// The XLA CUDA PJRT plugin.
    Cuda,
    /// Tessera's reference interpreter (kernels only; no PJRT).
    Interp,
}

impl DeviceKind {
    pub const ALL: [DeviceKind; 4] = [
        DeviceKind::Cpu,
        DeviceKind::Tpu,
        DeviceKind::Cuda,
        DeviceKind::Interp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Tpu => "tpu",
            DeviceKind::Cuda => "cuda",
            DeviceKind::Interp => "interp",
        }
    }

    pub fn parse(s: &str) -> Result<DeviceKind> {
        DeviceKind::ALL
            .into_iter()
            .find(|k| k.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| RuntimeError::UnknownDevice(s.to_string()))
    }

    /// What kernels are lowered for on a device of this kind ([`Device::target`]). The kind
    /// does not say a TPU's generation, so for `Tpu` it is the attached TPU's, read from the
    /// process's shared TPU client (an error where no TPU is attached): for callers that
    /// know only the kind, such as an op lowered for the eager runtime's device.
    pub fn target(self) -> Result<Target> {
        match self {
            DeviceKind::Interp => Ok(Target::Interpreter),
            DeviceKind::Cpu | DeviceKind::Cuda => Ok(Target::StableHlo),
            DeviceKind::Tpu => Device::new(DeviceKind::Tpu)?.target(),
        }
    }

    /// Client options for this kind. One CPU device: kernels and eager ops use one device, and
    /// fewer CPU "devices" means less thread noise in timings.
    fn client_options(self) -> Vec<ClientOption> {
        match self {
            DeviceKind::Cpu => vec![ClientOption::Int("cpu_device_count".into(), 1)],
            _ => Vec::new(),
        }
    }

    /// The platform names a client of this kind reports (`PJRT_Client_PlatformName`).
    fn platform_names(self) -> &'static [&'static str] {
        match self {
            DeviceKind::Cpu => &["cpu", "host"],
            DeviceKind::Tpu => &["tpu"],
            DeviceKind::Cuda => &["cuda", "gpu"],
            DeviceKind::Interp => &[],
        }
    }

    /// Loads the plugin at `path` as this kind (libtpu is refused for other kinds before it
    /// is loaded) and creates a client, checking the platform it reports.
    fn create_client(self, path: &std::path::Path) -> Result<Client> {
        let plugin = Plugin::load_as(self, path)?;
        let client = Client::create(plugin, &self.client_options())?;
        let platform = client.platform_name().to_ascii_lowercase();
        if !self.platform_names().contains(&platform.as_str()) {
            return Err(RuntimeError::WrongPluginKind {
                path: path.to_path_buf(),
                wanted: self.name().into(),
                found: format!("a plugin of platform `{platform}`"),
            });
        }
        Ok(client)
    }
}

/// Whether this machine has TPU chips: libtpu drives them through `/dev/accel*` (v2-v5p) or
/// VFIO (`/dev/vfio/<group>`, v5e and later).
pub fn tpu_attached() -> bool {
    let has = |dir: &str, keep: fn(&str) -> bool| {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| keep(&e.file_name().to_string_lossy()))
    };
    has("/dev", |n| n.starts_with("accel"))
        || has("/dev/vfio", |n| n.chars().all(|c| c.is_ascii_digit()))
}

impl std::fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A device to run on: a kind plus (except for the interpreter) a shared PJRT client.
#[derive(Clone, Debug)]
pub struct Device {
    kind: DeviceKind,
    client: Option<Client>,
    plugin_path: Option<PathBuf>,
}

/// One client per kind per process: creating a client costs tens of milliseconds and its
/// executable cache is only useful when shared.
fn clients() -> &'static Mutex<HashMap<DeviceKind, (Client, PathBuf)>> {
    static CLIENTS: OnceLock<Mutex<HashMap<DeviceKind, (Client, PathBuf)>>> = OnceLock::new();
    CLIENTS.get_or_init(Default::default)
}

impl Device {
    /// The default device: the XLA CPU plugin.
    pub fn cpu() -> Result<Device> {
        Device::new(DeviceKind::Cpu)
    }

    /// The reference interpreter (kernels only).
    pub fn interp() -> Device {
        Device {
            kind: DeviceKind::Interp,
            client: None,
            plugin_path: None,
        }
    }

    /// The device named by `TESSERA_DEVICE` (default `cpu`).
    pub fn from_env() -> Result<Device> {
        match std::env::var("TESSERA_DEVICE") {
            Ok(name) if !name.trim().is_empty() => Device::new(DeviceKind::parse(&name)?),
            _ => Device::cpu(),
        }
    }

    /// The shared device of `kind`, loading its plugin and creating its client on first use.
    pub fn new(kind: DeviceKind) -> Result<Device> {
        if kind == DeviceKind::Interp {
            return Ok(Device::interp());
        }
        let mut map = clients().lock().unwrap_or_else(|p| p.into_inner());
        if let Some((client, path)) = map.get(&kind) {
            client.inner().check_process()?;
            return Ok(Device {
                kind,
                client: Some(client.clone()),
                plugin_path: Some(path.clone()),
            });
        }
        if kind == DeviceKind::Tpu && !tpu_attached() {
            // libtpu would spend minutes looking for a TPU (metadata server, device files).
            return Err(RuntimeError::NoTpuAttached);
        }
        let path = plugin_store::locate(kind)?;
        let client = kind.create_client(&path)?;
        map.insert(kind, (client.clone(), path.clone()));
        Ok(Device {
            kind,
            client: Some(client),
            plugin_path: Some(path),
        })
    }

    /// A device on an explicit plugin file (a private client, not shared).
    pub fn with_plugin(kind: DeviceKind, path: &std::path::Path) -> Result<Device> {
        let client = kind.create_client(path)?;
        Ok(Device {
            kind,
            client: Some(client),
            plugin_path: Some(path.to_path_buf()),
        })
    }

    pub fn kind(&self) -> DeviceKind {
        self.kind
    }

    /// What kernels are lowered for on this device (`tessera_lowering::backend`): the
    /// interpreter, StableHLO (CPU, CUDA), or Mosaic for the attached TPU's generation, read
    /// from the device kind libtpu reports.
    pub fn target(&self) -> Result<Target> {
        match self.kind {
            // This device's own client: it may be a private one (`Device::with_plugin`).
            DeviceKind::Tpu => {
                let client = self.client()?;
                let kind = client
                    .devices()
                    .first()
                    .map(|d| d.kind.as_str())
                    .ok_or(RuntimeError::NoTpuAttached)?;
                Ok(Target::Tpu(TpuGeneration::from_device_kind(kind)?))
            }
            kind => kind.target(),
        }
    }

    pub fn plugin_path(&self) -> Option<&std::path::Path> {
        self.plugin_path.as_deref()
    }

    /// The PJRT client; an error on the interpreter.
    pub fn client(&self) -> Result<&Client> {
        self.client
            .as_ref()
            .ok_or_else(|| RuntimeError::NoClient(self.kind.name().into()))
    }
}
