//! Gather and scatter (indexing, embedding lookups, index_put, scatter_add, ...).
//! Batching dims (`operand_batching_dims`) are not exposed: ATen's ops need none of them.

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::types::{TensorType, Value};
use super::{as_i64, check_axes, dim_list, i64_array};

/// `#stablehlo.gather<...>` dimension numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GatherDims {
    /// Result dims that hold the slice (sorted).
    pub offset_dims: Vec<usize>,
    /// Operand dims of slice size 1 dropped from the result.
    pub collapsed_slice_dims: Vec<usize>,
    /// Operand dim indexed by each component of an index vector.
    pub start_index_map: Vec<usize>,
    /// The dim of `indices` holding index vectors (== its rank: scalar indices).
    pub index_vector_dim: usize,
}

/// `#stablehlo.scatter<...>` dimension numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScatterDims {
    pub update_window_dims: Vec<usize>,
    pub inserted_window_dims: Vec<usize>,
    pub scatter_dims_to_operand_dims: Vec<usize>,
    pub index_vector_dim: usize,
}

/// Sizes of the batch dims of `indices` (all dims except `index_vector_dim`), after checking
/// that index vectors have `n` components.
fn batch_dims(
    op: &'static str,
    indices: &Value,
    ivd: usize,
    n: usize,
) -> Result<Vec<usize>, BuildError> {
    if !indices.dtype().is_int() {
        return Err(BuildError::UnsupportedDType {
            op,
            dtype: indices.dtype(),
            expected: "integer indices",
        });
    }
    if ivd > indices.rank() {
        return Err(BuildError::AxisOutOfRange {
            op,
            axis: ivd as i64,
            rank: indices.rank(),
        });
    }
    let components = if ivd == indices.rank() {
        1
    } else {
        indices.shape()[ivd]
    };
    if components != n {
        return Err(BuildError::shape(
            op,
            format!("index vectors have {components} components, the map has {n}"),
        ));
    }
    Ok((0..indices.rank())
        .filter(|&d| d != ivd)
        .map(|d| indices.shape()[d])
        .collect())
}

impl FuncBuilder {
    /// Gathers slices of `slice_sizes` from `operand` at the positions in `indices`.
    pub fn gather(
        &mut self,
        operand: &Value,
        indices: &Value,
        dims: &GatherDims,
        slice_sizes: &[usize],
    ) -> Result<Value, BuildError> {
        const OP: &str = "stablehlo.gather";
        let r = operand.rank();
        let batch = batch_dims(
            OP,
            indices,
            dims.index_vector_dim,
            dims.start_index_map.len(),
        )?;
        check_axes(OP, &dims.start_index_map, r)?;
        check_axes(OP, &dims.collapsed_slice_dims, r)?;
        if slice_sizes.len() != r || slice_sizes.iter().zip(operand.shape()).any(|(s, d)| s > d) {
            return Err(BuildError::shape(
                OP,
                format!(
                    "slice sizes {slice_sizes:?} do not fit {:?}",
                    operand.shape()
                ),
            ));
        }
        if dims
            .collapsed_slice_dims
            .iter()
            .any(|&d| slice_sizes[d] > 1)
        {
            return Err(BuildError::shape(
                OP,
                "collapsed slice dims must have slice size <= 1",
            ));
        }
        let offsets: Vec<usize> = (0..r)
            .filter(|d| !dims.collapsed_slice_dims.contains(d))
            .map(|d| slice_sizes[d])
            .collect();
        let rank = batch.len() + offsets.len();
        check_axes(OP, &dims.offset_dims, rank)?;
        if dims.offset_dims.len() != offsets.len()
            || dims.offset_dims.windows(2).any(|w| w[0] > w[1])
        {
            return Err(BuildError::shape(
                OP,
                format!(
                    "offset_dims {:?} must be sorted and number {}",
                    dims.offset_dims,
                    offsets.len()
                ),
            ));
        }
        let (mut o, mut b) = (offsets.iter(), batch.iter());
        let shape: Vec<usize> = (0..rank)
            .map(|d| {
                if dims.offset_dims.contains(&d) {
                    o.next()
                } else {
                    b.next()
                }
                .copied()
                .unwrap_or(0)
            })
            .collect();
        let attrs = format!(
            "dimension_numbers = #stablehlo.gather<offset_dims = {}, collapsed_slice_dims = {}, start_index_map = {}, index_vector_dim = {}>, slice_sizes = {}, indices_are_sorted = false",
            dim_list(&dims.offset_dims),
            dim_list(&dims.collapsed_slice_dims),
            dim_list(&dims.start_index_map),
            dims.index_vector_dim,
            i64_array(&as_i64(slice_sizes))
        );
        self.emit1(
            OP,
            &[operand, indices],
            &attrs,
            operand.ty.with_shape(shape),
        )
    }

    /// Scatters `updates` into `inputs` at `indices`, combining with `body` (rank-0 args: the
    /// current values, then the updates; yields the new values). Results have the inputs' types.
    pub fn scatter<E: From<BuildError>>(
        &mut self,
        inputs: &[&Value],
        indices: &Value,
        updates: &[&Value],
        dims: &ScatterDims,
        body: impl FnOnce(&mut Self, &[Value]) -> Result<Vec<Value>, E>,
    ) -> Result<Vec<Value>, E> {
        const OP: &str = "stablehlo.scatter";
        if inputs.is_empty() || inputs.len() != updates.len() {
            return Err(BuildError::shape(OP, "needs one update per input, at least one").into());
        }
        let operand = inputs[0];
        let r = operand.rank();
        let batch = batch_dims(
            OP,
            indices,
            dims.index_vector_dim,
            dims.scatter_dims_to_operand_dims.len(),
        )?;
        check_axes(OP, &dims.scatter_dims_to_operand_dims, r)?;
        check_axes(OP, &dims.inserted_window_dims, r)?;
        let window_src: Vec<usize> = (0..r)
            .filter(|d| !dims.inserted_window_dims.contains(d))
            .collect();
        if dims.update_window_dims.len() != window_src.len() {
            return Err(BuildError::shape(
                OP,
                format!(
                    "{} update window dims, operand has {} window dims",
                    dims.update_window_dims.len(),
                    window_src.len()
                ),
            )
            .into());
        }
        for (x, u) in inputs.iter().zip(updates) {
            if x.shape() != operand.shape()
                || u.dtype() != x.dtype()
                || u.rank() != batch.len() + window_src.len()
            {
                return Err(BuildError::TypeMismatch {
                    op: OP,
                    lhs: x.ty.clone(),
                    rhs: u.ty.clone(),
                }
                .into());
            }
            check_axes(OP, &dims.update_window_dims, u.rank())?;
            for (&uw, &od) in dims.update_window_dims.iter().zip(&window_src) {
                if u.shape()[uw] > operand.shape()[od] {
                    return Err(BuildError::shape(
                        OP,
                        format!("update dim {uw} is larger than operand dim {od}"),
                    )
                    .into());
                }
            }
        }
        let scalars: Vec<TensorType> = inputs
            .iter()
            .map(|x| TensorType::scalar(x.dtype()))
            .collect();
        let region = self.scalar_region(OP, &scalars, body)?;
        let mut operands: Vec<&Value> = inputs.to_vec();
        operands.push(indices);
        operands.extend_from_slice(updates);
        let attrs = format!(
            "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = {}, inserted_window_dims = {}, scatter_dims_to_operand_dims = {}, index_vector_dim = {}>, indices_are_sorted = false, unique_indices = false",
            dim_list(&dims.update_window_dims),
            dim_list(&dims.inserted_window_dims),
            dim_list(&dims.scatter_dims_to_operand_dims),
            dims.index_vector_dim
        );
        let results = inputs.iter().map(|x| x.ty.clone()).collect();
        Ok(self.emit(OP, &operands, &attrs, vec![region], results)?)
    }
}
