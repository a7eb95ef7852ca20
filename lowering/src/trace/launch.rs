//! The launch spec (Pallas' `pallas_call`) and its tracing into a [`KernelProgram`].
//!
//! ```text
//! Kernel::launch()                          // or Launch::new(&kernel)
//!     .grid([m / bm, n / bn, k / bk])
//!     .input(BlockSpec::new([bm, bk], |i, _j, k| [i, k]))
//!     .input(BlockSpec::new([bk, bn], |_i, j, k| [k, j]))
//!     .output(BlockSpec::new([bm, bn], |i, j, _k| [i, j]), [m, n])
//!     .scratch(Vmem::<f32>::new([bm, bn]))
//!     .semantics([Parallel, Parallel, Arbitrary])
//!     .trace_program(&[(DType::F32, vec![m, k]), (DType::F32, vec![k, n])])?
//! ```
//!
//! The resulting `KernelProgram` (see `program.rs`) has public fields:
//! * `name: String`, `loc: Loc` (the kernel fn), `launch_loc: Loc` (the `trace_program`
//!   call), `dtype: Option<DType>` (the generic instance)
//! * `body: ir::Func`: params = refs of inputs, outputs, scratch (in that order), no results
//! * `grid: Vec<usize>`, `semantics: Vec<DimensionSemantics>` (one per grid axis)
//! * `inputs`, `outputs: Vec<BlockOperand>`: `name`, `dtype`, `array_shape`, `block_shape`,
//!   `index_map: ir::Func` (grid rank `i32` params -> block rank `i32` results, in blocks)
//! * `scratch: Vec<ScratchBuffer>`: `name`, `dtype`, `shape`, `space` (Vmem or Smem)
//! * `structural_hash() -> u64`, `num_steps()`, `Display` (a full text dump)
//! * the TPU rules (tiling, 64-bit types, VMEM, reduction axes) live with the Mosaic lowering:
//!   `mosaic::check_program(&program, generation)`
//!
//! Every check here reports the user's location: the `BlockSpec::new` call for block
//! shapes and index maps, the `.grid`/`.semantics`/`.output_dtype` calls for theirs, and
//! the `trace_program` call (the user's `.run`) for counts and dtypes of what is handed in.

use super::block_spec::BlockSpec;
use super::builder::{with, Session};
use super::element::Element;
use super::error::TraceError;
use super::tracer::KernelTracer;
use super::value::{Scalar, Traced};
use crate::dtype::DType;
use crate::ir::{verify, Func, Loc, MemorySpace, Type};
use crate::ir::{BlockOperand, DimensionSemantics, KernelProgram, ScratchBuffer};
use crate::kernel::{Generic, Kernel, ParamInfo, ParamRole};
use std::marker::PhantomData;

/// A scratch buffer request: dtype, shape and memory space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScratchSpec {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub space: MemorySpace,
}

/// A VMEM scratch buffer of `E` (`Vmem::<f32>::new([128, 128])`).
pub struct Vmem<E>(PhantomData<E>);
/// An SMEM scratch buffer of `E` (scalars; read with `load_scalar`).
pub struct Smem<E>(PhantomData<E>);

impl<E: Element> Vmem<E> {
    #[allow(clippy::new_ret_no_self)]
    pub fn new(shape: impl Into<Vec<usize>>) -> ScratchSpec {
        ScratchSpec {
            dtype: E::DTYPE,
            shape: shape.into(),
            space: MemorySpace::Vmem,
        }
    }
}
impl<E: Element> Smem<E> {
    #[allow(clippy::new_ret_no_self)]
    pub fn new(shape: impl Into<Vec<usize>>) -> ScratchSpec {
        ScratchSpec {
            dtype: E::DTYPE,
            shape: shape.into(),
            space: MemorySpace::Smem,
        }
    }
}

#[derive(Clone, Debug)]
struct OutputSpec {
    spec: BlockSpec,
    shape: Vec<usize>,
    dtype: Option<DType>,
    loc: Loc,
}

/// A kernel launch being specified. Builder methods never fail; `trace_program` checks.
#[derive(Clone)]
pub struct Launch {
    kernel: &'static dyn Kernel,
    loc: Loc,
    grid: (Vec<usize>, Loc),
    inputs: Vec<BlockSpec>,
    outputs: Vec<OutputSpec>,
    scratch: Vec<ScratchSpec>,
    semantics: Option<(Vec<DimensionSemantics>, Loc)>,
    dtype: Option<(DType, Loc)>,
    problems: Vec<TraceError>,
}

impl Launch {
    #[track_caller]
    pub fn new(kernel: &'static dyn Kernel) -> Launch {
        let loc = Loc::caller();
        Launch {
            kernel,
            loc,
            grid: (Vec::new(), loc),
            inputs: Vec::new(),
            outputs: Vec::new(),
            scratch: Vec::new(),
            semantics: None,
            dtype: None,
            problems: Vec::new(),
        }
    }

    /// The grid: one extent per axis (no call, or `[]`, means a single step).
    #[track_caller]
    pub fn grid(mut self, grid: impl Into<Vec<usize>>) -> Launch {
        self.grid = (grid.into(), Loc::caller());
        self
    }

    /// The next input's block spec (inputs in the kernel's parameter order).
    pub fn input(mut self, spec: BlockSpec) -> Launch {
        self.inputs.push(spec);
        self
    }

    /// The next output: block spec and the whole array's shape. Its dtype is the param's.
    #[track_caller]
    pub fn output(mut self, spec: BlockSpec, shape: impl Into<Vec<usize>>) -> Launch {
        self.outputs.push(OutputSpec {
            spec,
            shape: shape.into(),
            dtype: None,
            loc: Loc::caller(),
        });
        self
    }

    /// The dtype of the last output added: must agree with its param; fixes the kernel's
    /// generic dtype when no input does.
    #[track_caller]
    pub fn output_dtype(mut self, dtype: DType) -> Launch {
        let loc = Loc::caller();
        match self.outputs.last_mut() {
            Some(o) => o.dtype = Some(dtype),
            None => self.problems.push(TraceError::Launch {
                message: "`output_dtype` before any `output`".into(),
                loc,
            }),
        }
        self
    }

    /// The next scratch buffer (`Vmem::<f32>::new([..])` or `Smem::<i32>::new([..])`).
    pub fn scratch(mut self, spec: ScratchSpec) -> Launch {
        self.scratch.push(spec);
        self
    }

    /// One per grid axis; the default is all `Parallel`.
    #[track_caller]
    pub fn semantics(mut self, semantics: impl Into<Vec<DimensionSemantics>>) -> Launch {
        self.semantics = Some((semantics.into(), Loc::caller()));
        self
    }

    /// Instantiates a generic kernel with `dtype` explicitly (otherwise the inputs decide).
    #[track_caller]
    pub fn dtype(mut self, dtype: DType) -> Launch {
        self.dtype = Some((dtype, Loc::caller()));
        self
    }

    pub fn kernel(&self) -> &'static dyn Kernel {
        self.kernel
    }

    /// Where the launch was created.
    pub fn loc(&self) -> Loc {
        self.loc
    }

    /// Output array shapes, in order.
    pub fn output_shapes(&self) -> Vec<Vec<usize>> {
        self.outputs.iter().map(|o| o.shape.clone()).collect()
    }

    /// Checks the launch against the kernel and the input arrays (dtype, shape each), and
    /// traces index maps and body.
    #[track_caller]
    pub fn trace_program(
        &self,
        inputs: &[(DType, Vec<usize>)],
    ) -> Result<KernelProgram, TraceError> {
        let at = Loc::caller();
        if let Some(p) = self.problems.first() {
            return Err(p.clone());
        }
        let info = self.kernel.info();
        let params = |role| info.params_of(role).collect::<Vec<&ParamInfo>>();
        let (in_params, out_params, scratch_params) = (
            params(ParamRole::Input),
            params(ParamRole::Output),
            params(ParamRole::Scratch),
        );
        let count = |role, expected: usize, got: usize, loc| {
            if expected == got {
                Ok(())
            } else {
                Err(TraceError::OperandCount {
                    kernel: info.name,
                    role,
                    expected,
                    got,
                    loc,
                })
            }
        };
        count("input", in_params.len(), self.inputs.len(), at)?;
        count("output", out_params.len(), self.outputs.len(), at)?;
        count("scratch", scratch_params.len(), self.scratch.len(), at)?;
        count("input array", in_params.len(), inputs.len(), at)?;

        let dtype = self.resolve_generic(&in_params, &out_params, &scratch_params, inputs, at)?;
        // Generic params have `dtype` resolved by now (resolve_generic errs otherwise).
        let concrete = |p: &ParamInfo| p.dtype.or(dtype).unwrap_or(DType::F32);
        for (p, (d, _)) in in_params.iter().zip(inputs) {
            if *d != concrete(p) {
                return Err(mismatch(
                    info.name,
                    format!("input `{}` as declared", p.name),
                    concrete(p),
                    *d,
                    at,
                ));
            }
        }
        for (p, o) in out_params.iter().zip(&self.outputs) {
            match o.dtype {
                Some(d) if d != concrete(p) => {
                    return Err(mismatch(
                        info.name,
                        format!("output `{}` as declared", p.name),
                        concrete(p),
                        d,
                        o.loc,
                    ));
                }
                _ => {}
            }
        }
        for (p, s) in scratch_params.iter().zip(&self.scratch) {
            if s.dtype != concrete(p) {
                return Err(mismatch(
                    info.name,
                    format!("scratch `{}` as declared", p.name),
                    concrete(p),
                    s.dtype,
                    at,
                ));
            }
        }

        let (grid, grid_loc) = (&self.grid.0, self.grid.1);
        if let Some(d) = grid.iter().position(|&g| g == 0) {
            return Err(TraceError::Launch {
                message: format!("grid {grid:?} has an empty axis {d}"),
                loc: grid_loc,
            });
        }
        let semantics = match &self.semantics {
            None => vec![DimensionSemantics::Parallel; grid.len()],
            Some((s, loc)) if s.len() != grid.len() => {
                return Err(TraceError::Launch {
                    message: format!(
                        "{} dimension semantics for a grid of rank {} ({grid:?})",
                        s.len(),
                        grid.len()
                    ),
                    loc: *loc,
                });
            }
            Some((s, _)) => s.clone(),
        };

        let operand = |p: &ParamInfo, role: &str, spec: &BlockSpec, array: &[usize]| {
            block_operand(p, role, concrete(p), spec, array, grid)
        };
        let ins = in_params
            .iter()
            .zip(&self.inputs)
            .zip(inputs)
            .map(|((p, spec), (_, shape))| operand(p, "input", spec, shape))
            .collect::<Result<Vec<_>, _>>()?;
        let outs = out_params
            .iter()
            .zip(&self.outputs)
            .map(|(p, o)| operand(p, "output", &o.spec, &o.shape))
            .collect::<Result<Vec<_>, _>>()?;
        let scratch: Vec<ScratchBuffer> = scratch_params
            .iter()
            .zip(&self.scratch)
            .map(|(p, s)| ScratchBuffer {
                name: p.name.to_string(),
                dtype: s.dtype,
                shape: s.shape.clone(),
                space: s.space,
            })
            .collect();

        let body = self.trace_body(&ins, &outs, &scratch, grid.len(), dtype)?;
        Ok(KernelProgram {
            name: info.name.to_string(),
            loc: info.loc(),
            launch_loc: at,
            dtype,
            body,
            grid: grid.clone(),
            inputs: ins,
            outputs: outs,
            scratch,
            semantics,
        })
    }

    /// The generic dtype: from `.dtype()`, generic inputs, outputs with `output_dtype`, and
    /// generic scratch; all must agree and satisfy the kernel's bound.
    fn resolve_generic(
        &self,
        in_params: &[&ParamInfo],
        out_params: &[&ParamInfo],
        scratch_params: &[&ParamInfo],
        inputs: &[(DType, Vec<usize>)],
        at: Loc,
    ) -> Result<Option<DType>, TraceError> {
        let info = self.kernel.info();
        if let (Generic::None, Some(p)) =
            (info.generic, info.params.iter().find(|p| p.dtype.is_none()))
        {
            let message = format!(
                "is not generic but parameter `{}` has no declared dtype",
                p.name
            );
            return Err(TraceError::Generic {
                kernel: info.name,
                message,
                loc: info.loc(),
            });
        }
        let generic = |p: &&&ParamInfo| p.dtype.is_none();
        let mut sources: Vec<(DType, String, Loc)> = Vec::new();
        if let Some((d, loc)) = self.dtype {
            sources.push((d, "`.dtype(..)`".into(), loc));
        }
        for (p, (d, _)) in in_params.iter().zip(inputs).filter(|(p, _)| generic(p)) {
            sources.push((*d, format!("input `{}`", p.name), at));
        }
        for (p, o) in out_params
            .iter()
            .zip(&self.outputs)
            .filter(|(p, _)| generic(p))
        {
            if let Some(d) = o.dtype {
                sources.push((d, format!("output `{}`", p.name), o.loc));
            }
        }
        for (p, s) in scratch_params
            .iter()
            .zip(&self.scratch)
            .filter(|(p, _)| generic(p))
        {
            sources.push((s.dtype, format!("scratch `{}`", p.name), at));
        }
        let Some((first, first_from, first_loc)) = sources.first().cloned() else {
            return match info.generic {
                Generic::None => Ok(None),
                _ => Err(TraceError::Generic {
                    kernel: info.name,
                    message: "no operand fixes the generic dtype; call `.dtype(..)` on the launch"
                        .into(),
                    loc: at,
                }),
            };
        };
        if let Some((second, second_from, loc)) =
            sources.iter().find(|(d, _, _)| *d != first).cloned()
        {
            return Err(TraceError::GenericConflict {
                kernel: info.name,
                first,
                first_from,
                second,
                second_from,
                loc,
            });
        }
        match info.generic {
            // Only `.dtype(..)` can be a source here: every param has a dtype (checked above).
            Generic::None => Err(TraceError::Generic {
                kernel: info.name,
                message: format!("is not generic, so {first_from} does not apply"),
                loc: first_loc,
            }),
            Generic::Float if !first.is_float() => Err(TraceError::Generic {
                kernel: info.name,
                message: format!("is generic over `Float` but {first_from} is {first}"),
                loc: at,
            }),
            _ => Ok(Some(first)),
        }
    }

    fn trace_body(
        &self,
        ins: &[BlockOperand],
        outs: &[BlockOperand],
        scratch: &[ScratchBuffer],
        grid_rank: usize,
        dtype: Option<DType>,
    ) -> Result<Func, TraceError> {
        let info = self.kernel.info();
        let block = |o: &BlockOperand| Type::Ref {
            dtype: o.dtype,
            shape: o.block_shape.clone(),
            space: MemorySpace::Vmem,
        };
        let types: Vec<Type> = ins
            .iter()
            .map(block)
            .chain(outs.iter().map(block))
            .chain(scratch.iter().map(|s| Type::Ref {
                dtype: s.dtype,
                shape: s.shape.clone(),
                space: s.space,
            }))
            .collect();
        let (session, args) = Session::begin(&types, Some(grid_rank));
        let dtypes = types.iter().map(Type::dtype);
        let mut bound = dtypes.zip(args);
        let mut tracer = KernelTracer {
            kernel: info.name,
            kernel_loc: info.loc(),
            inputs: bound.by_ref().take(ins.len()).collect(),
            outputs: bound.by_ref().take(outs.len()).collect(),
            scratch: bound.collect(),
        };
        self.kernel.trace(&mut tracer, dtype)?;
        let body = session.finish(info.name, info.loc(), &[])?;
        verify(&body)?;
        Ok(body)
    }
}

fn mismatch(
    kernel: &'static str,
    what: String,
    expected: DType,
    got: DType,
    loc: Loc,
) -> TraceError {
    TraceError::DTypeMismatch {
        kernel,
        what,
        expected,
        got,
        loc,
    }
}

/// Checks a block spec against its array and the grid, and traces its index map.
fn block_operand(
    p: &ParamInfo,
    role: &str,
    dtype: DType,
    spec: &BlockSpec,
    array: &[usize],
    grid: &[usize],
) -> Result<BlockOperand, TraceError> {
    let what = format!("{role} `{}`", p.name);
    let (block, loc) = (&spec.block_shape, spec.loc);
    if block.len() != array.len() {
        return Err(TraceError::BlockRank {
            what,
            block: block.clone(),
            array: array.to_vec(),
            loc,
        });
    }
    for (dim, (&b, &a)) in block.iter().zip(array).enumerate() {
        if b == 0 || a % b != 0 {
            return Err(TraceError::BlockNotDividing {
                what,
                dim,
                block_dim: b,
                array_dim: a,
                block: block.clone(),
                array: array.to_vec(),
                loc,
            });
        }
    }
    if spec.arity != grid.len() {
        return Err(TraceError::IndexMapArity {
            what,
            arity: spec.arity,
            grid: grid.to_vec(),
            loc,
        });
    }
    let (session, args) = Session::begin(&vec![Type::index(); grid.len()], None);
    let indices: Vec<Scalar<i32>> = args.into_iter().map(Scalar::from_val).collect();
    let results = (spec.map)(&indices);
    if results.len() != block.len() {
        return Err(TraceError::IndexMapRank {
            what,
            got: results.len(),
            expected: block.len(),
            loc,
        });
    }
    let vals: Vec<_> = with(|b| results.iter().map(|r| r.to_val(b, loc)).collect());
    let index_map = session.finish(&format!("{}_index_map", p.name), loc, &vals)?;
    verify(&index_map)?;
    Ok(BlockOperand {
        name: p.name.to_string(),
        dtype,
        array_shape: array.to_vec(),
        block_shape: block.clone(),
        index_map,
    })
}
