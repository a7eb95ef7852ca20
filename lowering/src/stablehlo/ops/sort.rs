//! `stablehlo.sort` with a comparator region (sort, argsort, topk, ...).

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::types::{TensorType, Value};
use crate::dtype::DType;

impl FuncBuilder {
    /// Sorts `inputs` (one shape) together along `dimension`. The comparator gets rank-0
    /// args `lhs_0, rhs_0, lhs_1, rhs_1, ...` (one pair per input) and yields an i1 "lhs goes
    /// first". Results have the inputs' types.
    pub fn sort<E: From<BuildError>>(
        &mut self,
        inputs: &[&Value],
        dimension: usize,
        is_stable: bool,
        comparator: impl FnOnce(&mut Self, &[Value]) -> Result<Value, E>,
    ) -> Result<Vec<Value>, E> {
        const OP: &str = "stablehlo.sort";
        let Some(first) = inputs.first() else {
            return Err(BuildError::shape(OP, "needs at least one input").into());
        };
        if dimension >= first.rank() {
            return Err(BuildError::AxisOutOfRange {
                op: OP,
                axis: dimension as i64,
                rank: first.rank(),
            }
            .into());
        }
        if let Some(x) = inputs.iter().find(|x| x.shape() != first.shape()) {
            return Err(BuildError::TypeMismatch {
                op: OP,
                lhs: first.ty.clone(),
                rhs: x.ty.clone(),
            }
            .into());
        }
        let args: Vec<TensorType> = inputs
            .iter()
            .flat_map(|x| [TensorType::scalar(x.dtype()), TensorType::scalar(x.dtype())])
            .collect();
        let (region, yielded) =
            self.region(OP, &args, true, |f, a| comparator(f, a).map(|c| vec![c]))?;
        if yielded != [TensorType::scalar(DType::Bool)] {
            let got = yielded.iter().map(|t| t.to_string()).collect();
            return Err(BuildError::RegionResults {
                op: OP,
                expected: vec!["tensor<i1>".into()],
                got,
            }
            .into());
        }
        let attrs = format!("dimension = {dimension} : i64, is_stable = {is_stable}");
        let results = inputs.iter().map(|x| x.ty.clone()).collect();
        Ok(self.emit(OP, inputs, &attrs, vec![region], results)?)
    }
}
