//! `stablehlo.dot_general`: batched contractions (matmul, bmm, einsum-like).

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::types::Value;
use super::{check_axes, dim_list};

/// Which dims of each side are batch dims (paired in order) and which are contracted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DotDims {
    pub lhs_batch: Vec<usize>,
    pub rhs_batch: Vec<usize>,
    pub lhs_contract: Vec<usize>,
    pub rhs_contract: Vec<usize>,
}

impl DotDims {
    /// `[.., m, k] x [.., k, n]` with the `batch` leading dims paired.
    pub fn matmul(batch: usize) -> Self {
        DotDims {
            lhs_batch: (0..batch).collect(),
            rhs_batch: (0..batch).collect(),
            lhs_contract: vec![batch + 1],
            rhs_contract: vec![batch],
        }
    }
}

/// Operand precision: on TPU, `Default` runs f32 dots as one bf16 pass; `Highest` is full f32.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    #[default]
    Default,
    High,
    Highest,
}

impl Precision {
    fn keyword(self) -> &'static str {
        match self {
            Precision::Default => "DEFAULT",
            Precision::High => "HIGH",
            Precision::Highest => "HIGHEST",
        }
    }
}

impl FuncBuilder {
    /// `dot_general(lhs, rhs)`: result dims are the batch dims, then lhs's free dims, then
    /// rhs's free dims. Operands must share a dtype (convert first for mixed precision: that
    /// is how f32 accumulation of bf16 inputs is spelled here).
    pub fn dot_general(
        &mut self,
        lhs: &Value,
        rhs: &Value,
        dims: &DotDims,
        precision: Precision,
    ) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.dot_general";
        if lhs.dtype() != rhs.dtype() {
            return Err(BuildError::TypeMismatch {
                op: OP,
                lhs: lhs.ty.clone(),
                rhs: rhs.ty.clone(),
            });
        }
        if dims.lhs_batch.len() != dims.rhs_batch.len()
            || dims.lhs_contract.len() != dims.rhs_contract.len()
        {
            return Err(BuildError::shape(
                OP,
                "batch and contracting dims must pair up",
            ));
        }
        let lhs_used: Vec<usize> = dims
            .lhs_batch
            .iter()
            .chain(&dims.lhs_contract)
            .copied()
            .collect();
        let rhs_used: Vec<usize> = dims
            .rhs_batch
            .iter()
            .chain(&dims.rhs_contract)
            .copied()
            .collect();
        check_axes(OP, &lhs_used, lhs.rank())?;
        check_axes(OP, &rhs_used, rhs.rank())?;
        let pairs = dims
            .lhs_batch
            .iter()
            .zip(&dims.rhs_batch)
            .chain(dims.lhs_contract.iter().zip(&dims.rhs_contract));
        for (&l, &r) in pairs {
            if lhs.shape()[l] != rhs.shape()[r] {
                return Err(BuildError::shape(
                    OP,
                    format!(
                        "lhs dim {l} (size {}) vs rhs dim {r} (size {})",
                        lhs.shape()[l],
                        rhs.shape()[r]
                    ),
                ));
            }
        }
        let mut shape: Vec<usize> = dims.lhs_batch.iter().map(|&d| lhs.shape()[d]).collect();
        shape.extend(
            (0..lhs.rank())
                .filter(|d| !lhs_used.contains(d))
                .map(|d| lhs.shape()[d]),
        );
        shape.extend(
            (0..rhs.rank())
                .filter(|d| !rhs_used.contains(d))
                .map(|d| rhs.shape()[d]),
        );
        let p = precision.keyword();
        let attrs = format!(
            "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = {}, rhs_batching_dimensions = {}, \
             lhs_contracting_dimensions = {}, rhs_contracting_dimensions = {}>, \
             precision_config = [#stablehlo<precision {p}>, #stablehlo<precision {p}>]",
            dim_list(&dims.lhs_batch),
            dim_list(&dims.rhs_batch),
            dim_list(&dims.lhs_contract),
            dim_list(&dims.rhs_contract)
        );
        self.emit1(OP, &[lhs, rhs], &attrs, lhs.ty.with_shape(shape))
    }

    /// `[.., m, k] @ [.., k, n]` with equal leading (batch) dims, at full precision.
    pub fn matmul(&mut self, a: &Value, b: &Value) -> Result<Value, BuildError> {
        if a.rank() < 2 || a.rank() != b.rank() {
            return Err(BuildError::shape(
                "stablehlo.dot_general",
                format!(
                    "matmul needs equal ranks >= 2, got {:?} and {:?}",
                    a.shape(),
                    b.shape()
                ),
            ));
        }
        self.dot_general(a, b, &DotDims::matmul(a.rank() - 2), Precision::Highest)
    }
}
