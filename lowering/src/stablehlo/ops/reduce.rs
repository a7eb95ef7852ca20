//! Reductions: the general variadic `stablehlo.reduce` and `reduce_window` with a body region,
//! plus sum/product/max/min/all/any over any set of axes, with or without keepdims.

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::types::{TensorType, Value};
use super::elementwise::BinaryOp;
use super::{as_i64, check_axes, i64_array};
use crate::dtype::DType;

/// A reduction with a built-in combiner and identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Product,
    Max,
    Min,
    /// Logical/bitwise and (bool `all`).
    And,
    /// Logical/bitwise or (bool `any`).
    Or,
}

impl ReduceKind {
    fn combiner(self) -> BinaryOp {
        match self {
            ReduceKind::Sum => BinaryOp::Add,
            ReduceKind::Product => BinaryOp::Multiply,
            ReduceKind::Max => BinaryOp::Maximum,
            ReduceKind::Min => BinaryOp::Minimum,
            ReduceKind::And => BinaryOp::And,
            ReduceKind::Or => BinaryOp::Or,
        }
    }

    /// The identity element as a rank-0 constant of `dtype`.
    pub fn identity(self, f: &mut FuncBuilder, dtype: DType) -> Result<Value, BuildError> {
        let ty = TensorType::scalar(dtype);
        match self {
            ReduceKind::Sum | ReduceKind::Or => f.zeros(ty),
            ReduceKind::Product => f.full(ty, 1.0),
            ReduceKind::Max => f.min_value(ty),
            ReduceKind::Min => f.max_value(ty),
            // all bits set: -1 for signed ints, the maximum for bool and unsigned ints
            ReduceKind::And if dtype.is_signed_int() => f.full_int(ty, -1),
            ReduceKind::And => f.max_value(ty),
        }
    }
}

/// Window of a `reduce_window` (pooling). Empty vectors mean the defaults (strides 1,
/// dilations 1, no padding).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub dimensions: Vec<usize>,
    pub strides: Vec<usize>,
    pub base_dilations: Vec<usize>,
    pub window_dilations: Vec<usize>,
    /// (low, high) per dim.
    pub padding: Vec<(i64, i64)>,
}

impl FuncBuilder {
    /// Variadic reduce over `dims`. The body gets `2N` rank-0 args (N accumulators, then N
    /// elements) and yields N rank-0 values of the inputs' dtypes. Results drop `dims`.
    pub fn reduce<E: From<BuildError>>(
        &mut self,
        inputs: &[&Value],
        inits: &[&Value],
        dims: &[usize],
        body: impl FnOnce(&mut Self, &[Value]) -> Result<Vec<Value>, E>,
    ) -> Result<Vec<Value>, E> {
        const OP: &str = "stablehlo.reduce";
        let scalars = check_inits(OP, inputs, inits)?;
        let shape = inputs[0].shape().to_vec();
        check_axes(OP, dims, shape.len())?;
        let out_shape: Vec<usize> = (0..shape.len())
            .filter(|i| !dims.contains(i))
            .map(|i| shape[i])
            .collect();
        let region = self.scalar_region(OP, &scalars, body)?;
        let operands: Vec<&Value> = inputs.iter().chain(inits.iter()).copied().collect();
        let results = scalars
            .iter()
            .map(|t| t.with_shape(out_shape.clone()))
            .collect();
        let attrs = format!("dimensions = {}", i64_array(&as_i64(dims)));
        Ok(self.emit(OP, &operands, &attrs, vec![region], results)?)
    }

    /// Reduces `x` over `dims` with `kind`; with `keepdims` the reduced dims stay as size 1.
    pub fn reduce_kind(
        &mut self,
        x: &Value,
        kind: ReduceKind,
        dims: &[usize],
        keepdims: bool,
    ) -> Result<Value, BuildError> {
        if matches!(kind, ReduceKind::And | ReduceKind::Or) && x.dtype().is_float() {
            return Err(BuildError::UnsupportedDType {
                op: "stablehlo.reduce",
                dtype: x.dtype(),
                expected: "an integer or bool type",
            });
        }
        let init = kind.identity(self, x.dtype())?;
        let mut out = self.reduce(&[x], &[&init], dims, |f, a| {
            Ok::<_, BuildError>(vec![f.binary(kind.combiner(), &a[0], &a[1])?])
        })?;
        let r = out.remove(0);
        if !keepdims {
            return Ok(r);
        }
        let kept: Vec<usize> = (0..x.rank())
            .map(|i| if dims.contains(&i) { 1 } else { x.shape()[i] })
            .collect();
        self.reshape(&r, &kept)
    }

    /// Inclusive scan of `x` along `axis` with `kind` (`cumsum`, `cummax`, ...): a
    /// `reduce_window` whose window covers the `n` elements up to each one (low padding
    /// `n - 1` with the identity), as XLA lowers `jnp.cumsum` on TPU.
    pub fn scan_kind(
        &mut self,
        x: &Value,
        kind: ReduceKind,
        axis: usize,
    ) -> Result<Value, BuildError> {
        check_axes("stablehlo.reduce_window", &[axis], x.rank())?;
        let n = x.shape()[axis];
        let mut dimensions = vec![1; x.rank()];
        dimensions[axis] = n.max(1);
        let mut padding = vec![(0, 0); x.rank()];
        padding[axis] = (n.saturating_sub(1) as i64, 0);
        let window = Window {
            dimensions,
            padding,
            ..Window::default()
        };
        let init = kind.identity(self, x.dtype())?;
        let mut out = self.reduce_window(&[x], &[&init], &window, |f, a| {
            Ok::<_, BuildError>(vec![f.binary(kind.combiner(), &a[0], &a[1])?])
        })?;
        Ok(out.remove(0))
    }

    pub fn reduce_sum(
        &mut self,
        x: &Value,
        dims: &[usize],
        keepdims: bool,
    ) -> Result<Value, BuildError> {
        self.reduce_kind(x, ReduceKind::Sum, dims, keepdims)
    }
    pub fn reduce_max(
        &mut self,
        x: &Value,
        dims: &[usize],
        keepdims: bool,
    ) -> Result<Value, BuildError> {
        self.reduce_kind(x, ReduceKind::Max, dims, keepdims)
    }
    pub fn reduce_min(
        &mut self,
        x: &Value,
        dims: &[usize],
        keepdims: bool,
    ) -> Result<Value, BuildError> {
        self.reduce_kind(x, ReduceKind::Min, dims, keepdims)
    }

    /// Variadic `reduce_window`; the body is as for [`FuncBuilder::reduce`].
    pub fn reduce_window<E: From<BuildError>>(
        &mut self,
        inputs: &[&Value],
        inits: &[&Value],
        window: &Window,
        body: impl FnOnce(&mut Self, &[Value]) -> Result<Vec<Value>, E>,
    ) -> Result<Vec<Value>, E> {
        const OP: &str = "stablehlo.reduce_window";
        let scalars = check_inits(OP, inputs, inits)?;
        let shape = inputs[0].shape().to_vec();
        let r = shape.len();
        let or = |v: &Vec<usize>, d: usize| if v.is_empty() { vec![d; r] } else { v.clone() };
        let (strides, bdil, wdil) = (
            or(&window.strides, 1),
            or(&window.base_dilations, 1),
            or(&window.window_dilations, 1),
        );
        let padding = if window.padding.is_empty() {
            vec![(0, 0); r]
        } else {
            window.padding.clone()
        };
        if [
            window.dimensions.len(),
            strides.len(),
            bdil.len(),
            wdil.len(),
            padding.len(),
        ]
        .iter()
        .any(|&n| n != r)
        {
            return Err(BuildError::shape(
                OP,
                format!("window attributes must each have {r} entries"),
            )
            .into());
        }
        let mut out = Vec::with_capacity(r);
        for i in 0..r {
            let (w, s, bd, wd) = (
                window.dimensions[i] as i64,
                strides[i] as i64,
                bdil[i] as i64,
                wdil[i] as i64,
            );
            if w == 0 || s == 0 || bd == 0 || wd == 0 {
                return Err(BuildError::shape(
                    OP,
                    format!("dim {i}: window sizes, strides and dilations must be positive"),
                )
                .into());
            }
            let base = if shape[i] == 0 {
                0
            } else {
                (shape[i] as i64 - 1) * bd + 1
            } + padding[i].0
                + padding[i].1;
            let span = (w - 1) * wd + 1;
            out.push(if base < span {
                0
            } else {
                ((base - span) / s + 1) as usize
            });
        }
        let region = self.scalar_region(OP, &scalars, body)?;
        let operands: Vec<&Value> = inputs.iter().chain(inits.iter()).copied().collect();
        let results = scalars.iter().map(|t| t.with_shape(out.clone())).collect();
        let mut attrs = format!(
            "window_dimensions = {}, window_strides = {}, base_dilations = {}, window_dilations = {}",
            i64_array(&as_i64(&window.dimensions)),
            i64_array(&as_i64(&strides)),
            i64_array(&as_i64(&bdil)),
            i64_array(&as_i64(&wdil)),
        );
        // Padding is optional; leaving out all-zero padding also avoids rank 0's odd literal.
        if padding.iter().any(|&p| p != (0, 0)) {
            let pads: Vec<String> = padding.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
            attrs += &format!(
                ", padding = dense<[{}]> : tensor<{r}x2xi64>",
                pads.join(", ")
            );
        }
        Ok(self.emit(OP, &operands, &attrs, vec![region], results)?)
    }

    /// The combiner region shared by reduce, reduce_window and scatter: args are rank-0 values
    /// (accumulators then elements), the yield must match `scalars`.
    pub(crate) fn scalar_region<E: From<BuildError>>(
        &mut self,
        op: &'static str,
        scalars: &[TensorType],
        body: impl FnOnce(&mut Self, &[Value]) -> Result<Vec<Value>, E>,
    ) -> Result<Vec<String>, E> {
        let arg_types: Vec<TensorType> = scalars.iter().chain(scalars.iter()).cloned().collect();
        let (region, yielded) = self.region(op, &arg_types, true, body)?;
        if yielded != scalars {
            return Err(BuildError::RegionResults {
                op,
                expected: scalars.iter().map(|t| t.to_string()).collect(),
                got: yielded.iter().map(|t| t.to_string()).collect(),
            }
            .into());
        }
        Ok(region)
    }
}

/// Inputs of one shape, inits rank-0 of matching dtypes; returns the rank-0 element types.
fn check_inits(
    op: &'static str,
    inputs: &[&Value],
    inits: &[&Value],
) -> Result<Vec<TensorType>, BuildError> {
    if inputs.is_empty() || inputs.len() != inits.len() {
        return Err(BuildError::shape(
            op,
            format!("{} inputs but {} init values", inputs.len(), inits.len()),
        ));
    }
    for (x, init) in inputs.iter().zip(inits) {
        if x.shape() != inputs[0].shape() {
            return Err(BuildError::TypeMismatch {
                op,
                lhs: inputs[0].ty.clone(),
                rhs: x.ty.clone(),
            });
        }
        if init.ty != TensorType::scalar(x.dtype()) {
            return Err(BuildError::TypeMismatch {
                op,
                lhs: TensorType::scalar(x.dtype()),
                rhs: init.ty.clone(),
            });
        }
    }
    Ok(inputs
        .iter()
        .map(|x| TensorType::scalar(x.dtype()))
        .collect())
}
