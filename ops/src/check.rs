//! Checks of the data that torch makes and a compiled program cannot refuse by itself: indices
//! out of range (StableHLO's `gather` clamps them and `scatter` drops them, silently) and
//! integer division by zero (XLA returns -1). A lowering adds a [`Check`]: a small i64 flag
//! computed on the device next to the op's results and returned as an extra output of its
//! module; whoever reads the results reads the flags first and raises the check's error
//! ([`CheckKind::message`], torch's wording) when one is set: `ops::call` at once, the eager
//! runtime at once in Debug mode and at the next sync point otherwise.
//!
//! `TESSERA_CHECK_INDICES=0` turns them off (read once per process).

use crate::error::LowerResult;
use crate::lower::Lower;
use std::sync::OnceLock;
use tessera_lowering::stablehlo::{
    BinaryOp, BuildError, Comparison, ReduceKind, TensorType, Value,
};
use tessera_lowering::{DType, HostTensor};

/// What a check guards; its message is torch's for the same failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckKind {
    /// "index 10 is out of bounds for dimension 0 with size 5" (`prefix`: `index_copy_(): `).
    Bounds {
        prefix: &'static str,
        dim: usize,
        size: i64,
    },
    /// "index out of range in self" (`index_select`, `embedding`: torch names no index).
    InSelf,
    /// "INDICES element is out of DATA bounds, id=3 axis_dim=3" (torch's `index_select`
    /// along dim 1, another kernel).
    Indices { size: i64 },
    /// "out of range: tried to access index 15 on a tensor of 15 elements." (`take`, `put`).
    Flat { size: i64 },
    /// "Target 7 is out of bounds." (`nll_loss` and the losses built on it).
    Target,
    /// `embedding_bag`: "Index 1 of input takes value 10 which is not in the valid range [0, 5)".
    Bag { size: i64 },
    /// Any other fixed message (`target out of range`).
    Fixed(&'static str),
    /// Integer division or remainder by zero: "ZeroDivisionError".
    ZeroDivision,
}

impl CheckKind {
    /// The error when the check failed at position `at` (row-major, among the checked
    /// elements) holding `value`.
    pub fn message(&self, value: i64, at: i64) -> String {
        match self {
            CheckKind::Bounds { prefix, dim, size } => {
                format!("{prefix}index {value} is out of bounds for dimension {dim} with size {size}")
            }
            CheckKind::InSelf => "index out of range in self".into(),
            CheckKind::Indices { size } => {
                format!("INDICES element is out of DATA bounds, id={value} axis_dim={size}")
            }
            CheckKind::Flat { size } => format!(
                "out of range: tried to access index {value} on a tensor of {size} elements."
            ),
            CheckKind::Target => format!("Target {value} is out of bounds."),
            CheckKind::Bag { size } => format!(
                "Index {at} of input takes value {value} which is not in the valid range [0, {size})"
            ),
            CheckKind::Fixed(m) => m.to_string(),
            CheckKind::ZeroDivision => "ZeroDivisionError".into(),
        }
    }
}

/// One check of a lowering: its kind and its flag, a `tensor<3xi64>` holding
/// `[failed (0 or 1), the first offending value, its position]`.
#[derive(Clone, Debug)]
pub struct Check {
    pub kind: CheckKind,
    pub flag: Value,
}

/// Whether lowerings add checks: `TESSERA_CHECK_INDICES` unset or anything but `0`.
pub fn enabled_by_env() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("TESSERA_CHECK_INDICES").map_or(true, |v| v.trim() != "0"))
}

/// The failure a flag read back from the device reports, if any: `kind`'s message.
pub fn failure(kind: &CheckKind, flag: &HostTensor) -> Option<String> {
    let v = flag.to_vec::<i64>().ok()?;
    (v.first() == Some(&1)).then(|| kind.message(v[1], v[2]))
}

impl Lower {
    /// Flags the first element of `index` (an integer tensor) outside `lo..hi`, except those
    /// equal to `ignore` (nll_loss's `ignore_index`).
    pub fn check_range(
        &mut self,
        index: &Value,
        lo: i64,
        hi: i64,
        ignore: Option<i64>,
        kind: CheckKind,
    ) -> LowerResult<()> {
        if !self.checks_enabled || index.ty().num_elements() == 0 {
            return Ok(());
        }
        // Compared in the index's own dtype where the bounds fit (no conversion pass).
        let fits = |d: DType| {
            d == DType::I64
                || d == DType::I32
                    && [lo, hi, ignore.unwrap_or(0)]
                        .iter()
                        .all(|&b| i32::try_from(b).is_ok())
        };
        let i = if fits(index.dtype()) {
            index.clone()
        } else {
            self.f.convert(index, DType::I64)?
        };
        let ty = i.ty().clone();
        let lo_k = self.f.full_int(ty.clone(), lo as i128)?;
        let hi_k = self.f.full_int(ty.clone(), hi as i128)?;
        let below = self.f.compare(Comparison::Lt, &i, &lo_k)?;
        let above = self.f.compare(Comparison::Ge, &i, &hi_k)?;
        let mut bad = self.f.binary(BinaryOp::Or, &below, &above)?;
        if let Some(ig) = ignore {
            let ig = self.f.full_int(ty, ig as i128)?;
            let kept = self.f.compare(Comparison::Ne, &i, &ig)?;
            bad = self.f.binary(BinaryOp::And, &bad, &kept)?;
        }
        self.check_mask(&bad, &i, kind)
    }

    /// Flags the first zero of `divisor` (an integer tensor).
    pub fn check_nonzero(&mut self, divisor: &Value) -> LowerResult<()> {
        if !self.checks_enabled || divisor.ty().num_elements() == 0 {
            return Ok(());
        }
        let zero = self.f.full(divisor.ty().clone(), 0.0)?;
        let bad = self.f.compare(Comparison::Eq, divisor, &zero)?;
        self.check_mask(&bad, divisor, CheckKind::ZeroDivision)
    }

    /// Adds a check failing where `bad` (bool) holds; reports the first such element of
    /// `values` (an integer tensor of `bad`'s shape) and its row-major position. Cost
    /// (`ops/benches/index_checks.rs`, CPU plugin): one `or` reduction when nothing fails,
    /// median 1.23x the unchecked op over six ops (1.00x nll_loss to 1.68x a 64k-index
    /// gather); the search for the first position, a `select` + `min` reduction, only runs
    /// in the `if` branch taken on failure (it made the median 1.36x when always run).
    pub fn check_mask(&mut self, bad: &Value, values: &Value, kind: CheckKind) -> LowerResult<()> {
        let n = bad.ty().num_elements();
        let f = &mut self.f;
        let bad = f.reshape(bad, &[n])?;
        let values = f.reshape(values, &[n])?;
        // The common case (nothing out of range) costs one `or` reduction; the first failing
        // position is searched for only when there is one.
        let any = f.reduce_kind(&bad, ReduceKind::Or, &[0], false)?;
        let flag = f.if_else(
            &any,
            |f| {
                // Positions in i32 where they fit: a narrower reduction.
                let pd = if n < i32::MAX as usize {
                    DType::I32
                } else {
                    DType::I64
                };
                let pos = f.iota(TensorType::new(vec![n], pd), 0)?;
                let none = f.full_int(TensorType::new(vec![n], pd), n as i128)?;
                let at = f.select(&bad, &pos, &none)?;
                let first = f.reduce_min(&at, &[0], false)?;
                let value = f.dynamic_slice(&values, &[&first], &[1])?;
                let value = f.convert(&value, DType::I64)?;
                let first = f.convert(&first, DType::I64)?;
                let one = f.full_int(TensorType::new(vec![1], DType::I64), 1)?;
                let parts = [one, value, f.reshape(&first, &[1])?];
                let refs: Vec<&Value> = parts.iter().collect();
                Ok::<_, BuildError>(vec![f.concatenate(&refs, 0)?])
            },
            |f| Ok(vec![f.full_int(TensorType::new(vec![3], DType::I64), 0)?]),
        )?;
        self.checks.push(Check {
            kind,
            flag: flag[0].clone(),
        });
        Ok(())
    }
}
