//! The coverage report: the op table merged with the results of the last OpInfo sweep
//! (`make ops-coverage` writes them; see python/tools/sweep.py).

use crate::registry;
use crate::schema::{table, OpSchema};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// One op's results in a sweep file.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct SweepOp {
    pub passed: u64,
    pub failed: u64,
    #[serde(default)]
    pub dtypes: Vec<String>,
    #[serde(default)]
    pub errors: Vec<String>,
}

/// A sweep file.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Sweep {
    #[serde(default)]
    pub torch_version: String,
    #[serde(default)]
    pub wall_s: f64,
    pub ops: BTreeMap<String, SweepOp>,
}

#[derive(Debug, thiserror::Error)]
pub enum CoverageError {
    #[error("reading the sweep results {path}: {source} (run `make ops-coverage` to make them)")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the sweep results {path} are not valid: {source}")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
}

impl Sweep {
    pub fn load(path: &Path) -> Result<Sweep, CoverageError> {
        let text = std::fs::read_to_string(path).map_err(|source| CoverageError::Read {
            path: path.display().to_string(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| CoverageError::Parse {
            path: path.display().to_string(),
            source,
        })
    }
}

/// Whether Tessera can run an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// A default lowering (its own, or the functional op's for in-place/out forms).
    Implemented,
    /// A default lowering and at least one kernel override.
    Overridden,
    Missing,
}

#[derive(Clone, Debug, Serialize)]
pub struct OpCoverage {
    pub name: String,
    pub core: bool,
    pub status: Status,
    pub overrides: Vec<&'static str>,
    /// Dtypes with a passing sample in the sweep.
    pub dtypes: Vec<String>,
    pub passed: u64,
    pub failed: u64,
    /// Implemented, at least one sample passed, none failed.
    pub passing: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Coverage {
    pub core_total: usize,
    pub core_passing: usize,
    pub total: usize,
    pub passing: usize,
    pub core_implemented: usize,
    pub implemented: usize,
    pub torch_version: String,
    pub sweep_wall_s: f64,
    pub ops: Vec<OpCoverage>,
}

fn op_coverage(s: &OpSchema, sweep: &Sweep) -> OpCoverage {
    let name = s.full_name();
    let overrides: Vec<&'static str> = registry::overrides(&name)
        .iter()
        .map(|o| o.kernel)
        .collect();
    let status = match (registry::is_implemented(s), overrides.is_empty()) {
        (true, true) => Status::Implemented,
        (true, false) => Status::Overridden,
        (false, _) => Status::Missing,
    };
    let r = sweep.ops.get(&name).cloned().unwrap_or_default();
    OpCoverage {
        core: s.is_core(),
        passing: status != Status::Missing && r.passed > 0 && r.failed == 0,
        status,
        overrides,
        dtypes: r.dtypes,
        passed: r.passed,
        failed: r.failed,
        errors: r.errors,
        name,
    }
}

/// The table merged with `sweep`.
pub fn coverage(sweep: &Sweep) -> Coverage {
    let ops: Vec<OpCoverage> = table().iter().map(|s| op_coverage(s, sweep)).collect();
    let count = |f: &dyn Fn(&OpCoverage) -> bool| ops.iter().filter(|o| f(o)).count();
    Coverage {
        core_total: count(&|o| o.core),
        core_passing: count(&|o| o.core && o.passing),
        total: ops.len(),
        passing: count(&|o| o.passing),
        core_implemented: count(&|o| o.core && o.status != Status::Missing),
        implemented: count(&|o| o.status != Status::Missing),
        torch_version: sweep.torch_version.clone(),
        sweep_wall_s: sweep.wall_s,
        ops,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_op_passes_only_with_passing_samples_and_no_failures() {
        let mut sweep = Sweep::default();
        let ok = SweepOp {
            passed: 3,
            ..Default::default()
        };
        let bad = SweepOp {
            passed: 3,
            failed: 1,
            ..Default::default()
        };
        sweep.ops.insert("add.Tensor".into(), ok);
        sweep.ops.insert("abs".into(), bad);
        let c = coverage(&sweep);
        let get = |n: &str| c.ops.iter().find(|o| o.name == n).unwrap();
        assert!(get("add.Tensor").passing);
        assert!(!get("abs").passing);
        assert!(!get("mm").passing, "no samples: not passing");
        assert_eq!(c.core_total, 193);
        assert_eq!(c.total, table().len());
    }
}
