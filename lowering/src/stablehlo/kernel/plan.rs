//! The emitter's view of a launch: what both forms need, checked once up front so the forms
//! themselves only translate.

use super::error::EmitError;
use crate::dtype::DType;
use crate::ir::{self, Func, Type, ValueId};
use crate::stablehlo::{FuncBuilder, Value};

/// One blocked operand (input or output).
pub(super) struct Operand<'a> {
    /// The kernel parameter's name.
    pub name: &'a str,
    /// The body's ref param that sees this operand's block.
    pub param: ValueId,
    pub array: Vec<usize>,
    pub dtype: DType,
    pub block: Vec<usize>,
    /// The shape the body's ref has: `block` without its squeezed dims.
    pub view: Vec<usize>,
    /// Grid indices -> block indices (element offset = block index * block size), or along
    /// `element`'s dims element offsets.
    pub index_map: &'a Func,
    /// Dims whose index-map result is an element offset (`BlockSpec::element`), sorted.
    pub element: &'a [usize],
}

impl Operand<'_> {
    /// A block covering the whole array: read and written without slicing (its index map can
    /// only yield 0s, and StableHLO's clamping would make any other start 0 as well).
    pub fn whole(&self) -> bool {
        self.block == self.array
    }

    /// The element offset along dim `d` of the index map's result `index` there: `index`
    /// itself for an element dim, else `index * block` (the block size broadcast to `lead`
    /// first where given: `index` is then one result per grid step).
    pub fn start(
        &self,
        f: &mut FuncBuilder,
        d: usize,
        index: &Value,
        lead: Option<&[usize]>,
    ) -> Result<Value, EmitError> {
        if self.element.contains(&d) {
            return Ok(index.clone());
        }
        let mut size = f.scalar(DType::I32, self.block[d] as f64)?;
        if let Some(lead) = lead {
            size = f.broadcast_in_dim(&size, lead, &[])?;
        }
        Ok(f.mul(index, &size)?)
    }
}

pub(super) struct Scratch {
    pub param: ValueId,
    pub shape: Vec<usize>,
    pub dtype: DType,
}

pub(super) struct Plan<'a> {
    pub name: &'a str,
    pub body: &'a Func,
    pub grid: Vec<usize>,
    /// Scalar-prefetch arrays: whole arrays, the module's first arguments.
    pub prefetch: Vec<Scratch>,
    pub inputs: Vec<Operand<'a>>,
    pub outputs: Vec<Operand<'a>>,
    pub scratch: Vec<Scratch>,
    /// `(input, output)`: the output starts as the input's contents.
    pub aliases: Vec<(usize, usize)>,
    /// Per grid axis: true when `parallel`, false when `arbitrary`.
    pub parallel: Vec<bool>,
    /// HBM operands, DMA ops or scoped scratch: the body moves data itself (or allocates),
    /// so only the grid loop (which runs it step by step) fits.
    pub manual_dma: bool,
}

impl Plan<'_> {
    pub fn launch_error(&self, message: String) -> EmitError {
        EmitError::Launch {
            kernel: self.name.to_string(),
            message,
        }
    }

    /// Verifies the IR and that the launch fits the body: each operand's ref param has the
    /// block's shape and dtype, each index map takes the grid and yields one index per dim.
    pub fn check(&self) -> Result<(), EmitError> {
        ir::verify(self.body)?;
        if self.parallel.len() != self.grid.len() {
            return Err(self.launch_error(format!(
                "{} dimension semantics for a rank-{} grid",
                self.parallel.len(),
                self.grid.len()
            )));
        }
        let steps = self
            .grid
            .iter()
            .try_fold(1usize, |acc, &g| acc.checked_mul(g));
        if steps.is_none_or(|s| s > i32::MAX as usize) {
            return Err(self.launch_error(format!(
                "grid {:?} has more steps than an i32 counts",
                self.grid
            )));
        }
        let roles = self
            .inputs
            .iter()
            .map(|o| ("input", o))
            .chain(self.outputs.iter().map(|o| ("output", o)));
        for (k, (role, o)) in roles.enumerate() {
            ir::verify(o.index_map)?;
            let map = o.index_map;
            let ng = self.grid.len();
            if map.params().len() != ng + self.prefetch.len() {
                let takes = map.params().len();
                return Err(self.launch_error(if self.prefetch.is_empty() {
                    format!("{role} #{k}: index map takes {takes} grid indices, the grid has {ng}")
                } else {
                    format!(
                        "{role} #{k}: index map takes {takes} params, the grid has {ng} indices \
                         and the launch {} scalar-prefetch arrays",
                        self.prefetch.len()
                    )
                }));
            }
            let param_types = map.param_types();
            let all_index = param_types[..ng]
                .iter()
                .chain(&map.result_types())
                .all(Type::is_index);
            for (a, t) in self.prefetch.iter().zip(&param_types[ng..]) {
                if t.dtype() != a.dtype || t.shape() != a.shape.as_slice() || !t.is_ref() {
                    return Err(self.launch_error(format!(
                        "{role} #{k}: index map param {t} is not the prefetch array's ref"
                    )));
                }
            }
            if map.results().len() != o.array.len() || !all_index {
                return Err(self.launch_error(format!(
                    "{role} #{k}: index map must yield {} i32 block indices",
                    o.array.len()
                )));
            }
            if o.block.len() != o.array.len() || o.block.iter().zip(&o.array).any(|(b, a)| b > a) {
                return Err(self.launch_error(format!(
                    "{role} #{k}: block {:?} does not fit array {:?}",
                    o.block, o.array
                )));
            }
            self.check_ref(o.param, &o.view, o.dtype)?;
        }
        for s in self.prefetch.iter().chain(&self.scratch) {
            self.check_ref(s.param, &s.shape, s.dtype)?;
        }
        Ok(())
    }

    fn check_ref(&self, param: ValueId, shape: &[usize], dtype: DType) -> Result<(), EmitError> {
        let is_param = self.body.params().contains(&param);
        let t = self.body.values.get(param.0 as usize);
        match t {
            Some(Type::Ref {
                dtype: d, shape: s, ..
            }) if is_param && *d == dtype && s == shape => Ok(()),
            _ => Err(self.launch_error(format!(
                "body param {param} should be a ref of {shape:?} {dtype}, is {t:?}"
            ))),
        }
    }
}
