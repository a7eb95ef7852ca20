//! TPU generations Tessera targets and their VMEM sizes. Capacities are JAX's
//! `pallas/mosaic/tpu_info.py` (per TensorCore); the scoped defaults are XLA's default
//! `--xla_tpu_scoped_vmem_limit_kib` (16 MiB before v6e, 32 MiB from v6e on), the limit a
//! kernel gets unless its `tpu_custom_call` asks for more.

use super::error::MosaicError;
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TpuGeneration {
    V4,
    V5e,
    V5p,
    V6e,
    Tpu7x,
}

const MIB: usize = 1 << 20;

impl TpuGeneration {
    pub const ALL: [TpuGeneration; 5] = [
        TpuGeneration::V4,
        TpuGeneration::V5e,
        TpuGeneration::V5p,
        TpuGeneration::V6e,
        TpuGeneration::Tpu7x,
    ];

    /// The name as in topology strings (`v5e` of `v5e:2x2`).
    pub fn name(self) -> &'static str {
        match self {
            TpuGeneration::V4 => "v4",
            TpuGeneration::V5e => "v5e",
            TpuGeneration::V5p => "v5p",
            TpuGeneration::V6e => "v6e",
            TpuGeneration::Tpu7x => "tpu7x",
        }
    }

    /// The generation of a PJRT topology name (`v5e:2x2`, `tpu7x:2x2x1`, or just `v6e`).
    pub fn from_topology(topology: &str) -> Result<TpuGeneration, MosaicError> {
        let name = topology
            .split(':')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let found = match name.as_str() {
            "v4" => TpuGeneration::V4,
            "v5e" | "v5litepod" | "v5lite" => TpuGeneration::V5e,
            "v5p" => TpuGeneration::V5p,
            "v6e" | "v6lite" => TpuGeneration::V6e,
            "tpu7x" | "v7x" => TpuGeneration::Tpu7x,
            _ => return Err(MosaicError::UnknownTopology(topology.to_string())),
        };
        Ok(found)
    }

    /// The generation of an attached TPU from its PJRT device kind (`TPU v4`, `TPU v5 lite`,
    /// `TPU v5`/`TPU v5p`, `TPU v6 lite`, `TPU7x`: the names libtpu reports and JAX matches).
    pub fn from_device_kind(kind: &str) -> Result<TpuGeneration, MosaicError> {
        let name: String = kind
            .to_ascii_lowercase()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let found = match name.as_str() {
            "tpu v4" => TpuGeneration::V4,
            "tpu v5 lite" | "tpu v5e" => TpuGeneration::V5e,
            "tpu v5" | "tpu v5p" => TpuGeneration::V5p,
            "tpu v6 lite" | "tpu v6e" => TpuGeneration::V6e,
            "tpu7x" | "tpu 7x" | "tpu v7x" => TpuGeneration::Tpu7x,
            _ => return Err(MosaicError::UnknownDeviceKind(kind.to_string())),
        };
        Ok(found)
    }

    /// Physical VMEM per TensorCore: no kernel can use more.
    pub fn vmem_capacity_bytes(self) -> usize {
        match self {
            TpuGeneration::V4 => 16 * MIB,
            TpuGeneration::V5e | TpuGeneration::V6e => 128 * MIB,
            TpuGeneration::V5p | TpuGeneration::Tpu7x => 64 * MIB,
        }
    }

    /// TensorCores one kernel runs on: the extent a `CoreParallel` grid axis must have.
    /// Measured with libtpu's AOT compiler (v4:2x2x2, v5e:2x2, v5p:2x2x1, v6e:2x2,
    /// tpu7x:2x2x1): only v5p runs its two TensorCores as one megacore device; v5e and v6e
    /// have one TensorCore per chip, tpu7x's two are separate devices, and libtpu treats v4
    /// as one core. libtpu refuses any other extent ("Core-parallel dimension 0 has
    /// iteration bound: 2, which is greater than the number of active cores: 1"; on v5p an
    /// extent of 1 fails too).
    pub fn active_tensor_cores(self) -> usize {
        match self {
            TpuGeneration::V5p => 2,
            TpuGeneration::V4 | TpuGeneration::V5e | TpuGeneration::V6e | TpuGeneration::Tpu7x => 1,
        }
    }

    /// The scoped VMEM limit a kernel gets by default.
    pub fn default_scoped_vmem_bytes(self) -> usize {
        match self {
            TpuGeneration::V4 | TpuGeneration::V5e | TpuGeneration::V5p => 16 * MIB,
            TpuGeneration::V6e | TpuGeneration::Tpu7x => 32 * MIB,
        }
    }
}

impl FromStr for TpuGeneration {
    type Err = MosaicError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TpuGeneration::from_topology(s)
    }
}

impl fmt::Display for TpuGeneration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::TpuGeneration;

    #[test]
    fn device_kinds_name_their_generation() {
        for (kind, generation) in [
            ("TPU v4", TpuGeneration::V4),
            ("TPU v5 lite", TpuGeneration::V5e),
            ("TPU v5", TpuGeneration::V5p),
            ("TPU v5p", TpuGeneration::V5p),
            ("TPU v6 lite", TpuGeneration::V6e),
            ("TPU7x", TpuGeneration::Tpu7x),
        ] {
            assert_eq!(TpuGeneration::from_device_kind(kind).unwrap(), generation);
        }
        let err = TpuGeneration::from_device_kind("TPU v3").unwrap_err();
        assert!(err.to_string().contains("`TPU v3`"), "{err}");
    }
}
