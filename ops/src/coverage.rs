//! The coverage report: the op table merged with the results of the last OpInfo sweep
//! (`make ops-coverage` writes them; see python/tools/sweep.py).

use crate::registry;
use crate::schema::{table, OpSchema, Tag};
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
    /// Dtypes the sweep saw Tessera refuse for this op, with the refusal (a sweep may record
    /// them; none is fine).
    #[serde(default)]
    pub refused: BTreeMap<String, String>,
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
    /// Dtypes PyTorch accepts that this op refuses, each with its reason: the op's listed
    /// refusals, the sweep's, and complex for ops whose lowering is real-only.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub refused_dtypes: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Coverage {
    pub core_total: usize,
    pub core_passing: usize,
    /// Overloads.
    pub total: usize,
    pub passing: usize,
    /// Distinct ops: names without overload, in-place and out forms counted with their
    /// functional op ([`op_name`]).
    pub ops_total: usize,
    /// Distinct ops every overload of which is passing.
    pub ops_passing: usize,
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
    let mut refused_dtypes = r.refused.clone();
    for d in DTYPE_REFUSALS.iter().filter(|d| d.op == op_name(s)) {
        for dt in d.dtypes {
            refused_dtypes.insert(dt.to_string(), d.reason.to_string());
        }
    }
    if status != Status::Missing && !accepts_complex(s) {
        for dt in ["complex64", "complex128"] {
            refused_dtypes.entry(dt.to_string()).or_insert_with(|| {
                "the lowering is real-only: complex tensors are refused as unsupported".to_string()
            });
        }
    }
    OpCoverage {
        refused_dtypes,
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

/// Whether the lowering that runs `s` (its own, or its functional op's) takes complex tensors.
fn accepts_complex(s: &OpSchema) -> bool {
    registry::default_lowering(&s.full_name())
        .or_else(|| s.functional.and_then(registry::default_lowering))
        .is_some_and(|l| l.complex)
}

/// The distinct op an overload belongs to: its name without overload, or for an in-place
/// or out overload the name of the functional op it writes (`add_.Tensor`, `add.out` ->
/// `add`); an in-place overload without a functional op in the table drops its `_`.
pub fn op_name(s: &OpSchema) -> &'static str {
    if let Some(f) = s.functional {
        return f.split('.').next().unwrap_or(f);
    }
    if s.has_tag(Tag::Inplace) && !s.name.ends_with("__") {
        return s.name.strip_suffix('_').unwrap_or(s.name);
    }
    s.name
}

/// A dtype PyTorch's CPU kernel accepts for an op that Tessera refuses, and why.
pub struct DtypeRefusal {
    /// The distinct op ([`op_name`]).
    pub op: &'static str,
    pub dtypes: &'static [&'static str],
    pub reason: &'static str,
}

/// The refusals of table ops beyond complex (which [`coverage`] adds for every real-only
/// lowering).
pub static DTYPE_REFUSALS: &[DtypeRefusal] = &[
    DtypeRefusal {
        op: "mse_loss_backward",
        dtypes: &["int64", "int32", "int16", "int8", "uint8"],
        reason: "integer gradients: PyTorch's CPU kernel converts the 2/N factor of a mean to the integer type (truncating it to 0 for N > 2); refused rather than reproduced",
    },
    DtypeRefusal {
        op: "complex",
        dtypes: &["float16"],
        reason: COMPLEX32,
    },
    DtypeRefusal {
        op: "polar",
        dtypes: &["float16"],
        reason: COMPLEX32,
    },
    DtypeRefusal {
        op: "view_as_complex",
        dtypes: &["float16"],
        reason: COMPLEX32,
    },
];

/// Why f16 parts are refused where PyTorch makes complex32 of them.
const COMPLEX32: &str =
    "the result would be complex32 (f16 parts), which StableHLO has no element type for";

/// The table merged with `sweep`.
pub fn coverage(sweep: &Sweep) -> Coverage {
    let ops: Vec<OpCoverage> = table().iter().map(|s| op_coverage(s, sweep)).collect();
    let count = |f: &dyn Fn(&OpCoverage) -> bool| ops.iter().filter(|o| f(o)).count();
    // Distinct ops: passing when every overload of the op is.
    let mut distinct: BTreeMap<&'static str, bool> = BTreeMap::new();
    for (s, o) in table().iter().zip(&ops) {
        *distinct.entry(op_name(s)).or_insert(true) &= o.passing;
    }
    Coverage {
        core_total: count(&|o| o.core),
        core_passing: count(&|o| o.core && o.passing),
        total: ops.len(),
        passing: count(&|o| o.passing),
        ops_total: distinct.len(),
        ops_passing: distinct.values().filter(|&&p| p).count(),
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
        assert!(
            c.ops_total >= 300 && c.ops_total < c.total,
            "{}",
            c.ops_total
        );
        assert_eq!(c.ops_passing, 0, "no op has all its overloads passing");
    }

    #[test]
    fn distinct_ops_count_inplace_and_out_forms_with_their_functional_op() {
        let name = |n: &str| op_name(crate::schema::find(n).unwrap());
        assert_eq!(name("add.Tensor"), "add");
        assert_eq!(name("add_.Tensor"), "add");
        assert_eq!(name("add.out"), "add");
        assert_eq!(
            name("hardsigmoid_backward.grad_input"),
            "hardsigmoid_backward"
        );
        assert_eq!(name("_softmax"), "_softmax");
        // An op passes when each of its overloads does.
        let mut sweep = Sweep::default();
        for s in table().iter().filter(|s| op_name(s) == "abs") {
            let ok = SweepOp {
                passed: 2,
                ..Default::default()
            };
            sweep.ops.insert(s.full_name(), ok);
        }
        assert_eq!(coverage(&sweep).ops_passing, 1);
        sweep.ops.get_mut("abs_").unwrap().failed = 1;
        assert_eq!(coverage(&sweep).ops_passing, 0);
    }

    #[test]
    fn refused_dtypes_are_listed_with_their_reason() {
        let mut sweep = Sweep::default();
        let mut r = SweepOp::default();
        r.refused.insert(
            "uint16".into(),
            "\"foo\" not implemented for 'UInt16'".into(),
        );
        sweep.ops.insert("mm".into(), r);
        let c = coverage(&sweep);
        let get = |n: &str| c.ops.iter().find(|o| o.name == n).unwrap();
        let mm = get("mm");
        assert!(mm.refused_dtypes["uint16"].contains("not implemented"));
        assert!(mm.refused_dtypes["complex64"].contains("real-only"));
        assert!(!get("_fft_c2r").refused_dtypes.contains_key("complex64"));
        let mse = get("mse_loss_backward");
        assert!(mse.refused_dtypes["int64"].contains("2/N"));
        let json = serde_json::to_value(&c).unwrap();
        for key in [
            "ops_total",
            "ops_passing",
            "core_total",
            "core_passing",
            "total",
            "passing",
        ] {
            assert!(json.get(key).is_some(), "{key}");
        }
    }
}
