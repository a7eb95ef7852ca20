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
//! The resulting `KernelProgram` (see `ir/program.rs`) has public fields:
//! * `name: String`, `loc: Loc` (the kernel fn), `launch_loc: Loc` (the `trace_program`
//!   call), `semantics_loc: Loc` (the `.semantics` call), `dtype: Option<DType>` (the
//!   generic instance)
//! * `body: ir::Func`: params = refs of scalar-prefetch arrays (whole, SMEM), inputs,
//!   outputs, scratch (in that order), no results
//! * `prefetch: Vec<PrefetchOperand>`: `&Prefetch<i32>` params; their arrays are the first
//!   arrays handed to `trace_program`/`run`, and every index map takes them after the grid
//!   indices (`BlockSpec::prefetch`)
//! * `aliases: Vec<(usize, usize)>`: `.alias(input, output)` pairs (in-place outputs)
//! * `grid: Vec<usize>`, `semantics: Vec<DimensionSemantics>` (one per grid axis)
//! * `inputs`, `outputs: Vec<BlockOperand>`: `name`, `dtype`, `array_shape`, `block_shape`,
//!   `space` (`Vmem`, or `Any` for `BlockSpec::any()`: left in HBM, the whole array, reached
//!   by `async_copy` only), `squeezed` (`.squeeze([..])`: size-1 block dims the body's ref
//!   lacks), `element` (`.element([..])`: dims whose index-map results are element offsets),
//!   `index_map: ir::Func` (grid rank `i32` params, then the prefetch refs -> block rank `i32` results,
//!   in blocks or, for element dims, elements; evaluated over the whole grid here, unless it reads prefetch data)
//! * `scratch: Vec<ScratchBuffer>`: `name`, `dtype`, `shape`, `space` (Vmem, Smem, or
//!   Semaphore for `DmaSemaphores::new(n)`)
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
use super::index::IndexValue;
use super::refs::Prefetch;
use super::tracer::KernelTracer;
use super::value::{Scalar, Traced};
use crate::dtype::DType;
use crate::ir::{verify, Func, Loc, MemorySpace, Type};
use crate::ir::{BlockOperand, DimensionSemantics, KernelProgram, PrefetchOperand, ScratchBuffer};
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

/// An array of `n` DMA semaphores (Pallas' `pltpu.SemaphoreType.DMA((n,))`), bound to a
/// `&mut Scratch<i32>` param; `sems.sem(i)` names one for `async_copy`.
pub struct DmaSemaphores;

impl DmaSemaphores {
    #[allow(clippy::new_ret_no_self)]
    pub fn new(n: usize) -> ScratchSpec {
        ScratchSpec {
            dtype: DType::I32,
            shape: vec![n],
            space: MemorySpace::Semaphore,
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
    aliases: Vec<(usize, usize, Loc)>,
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
            aliases: Vec::new(),
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

    /// One per grid axis (`Parallel`, `CoreParallel` or `Arbitrary`); the default is all
    /// `Parallel`. At most one axis may be `CoreParallel` (an error here otherwise).
    #[track_caller]
    pub fn semantics(mut self, semantics: impl Into<Vec<DimensionSemantics>>) -> Launch {
        self.semantics = Some((semantics.into(), Loc::caller()));
        self
    }

    /// Makes output `output` share input `input`'s buffer (Pallas' `input_output_aliases`;
    /// `input` counts the blocked inputs, not the scalar-prefetch arrays): the output starts
    /// as the input, so blocks the kernel never writes keep the input's values. Both must
    /// have one dtype and shape.
    #[track_caller]
    pub fn alias(mut self, input: usize, output: usize) -> Launch {
        self.aliases.push((input, output, Loc::caller()));
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
        let (pre_params, in_params, out_params, scratch_params) = (
            params(ParamRole::Prefetch),
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
        let arrays = if pre_params.is_empty() {
            "input array"
        } else {
            "input array (scalar-prefetch arrays first)"
        };
        count(arrays, pre_params.len() + in_params.len(), inputs.len(), at)?;
        let (pre_arrays, inputs) = inputs.split_at(pre_params.len());
        let prefetch = prefetch_operands(info.name, &pre_params, pre_arrays, at)?;

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
            Some((s, loc)) => {
                let core = |a: &&DimensionSemantics| **a == DimensionSemantics::CoreParallel;
                if s.iter().filter(core).count() > 1 {
                    return Err(TraceError::Launch {
                        message: format!(
                            "semantics {s:?} mark more than one grid axis `CoreParallel`: the \
                             TensorCores split one axis (Mosaic supports one core-parallel axis)"
                        ),
                        loc: *loc,
                    });
                }
                s.clone()
            }
        };

        let operand = |p: &ParamInfo, role: &str, spec: &BlockSpec, array: &[usize]| {
            block_operand(p, role, concrete(p), spec, array, grid, &prefetch)
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

        for o in ins.iter().chain(&outs) {
            check_block_indices(o, grid)?;
        }
        let aliases = self.check_aliases(&ins, &outs)?;
        let body = self.trace_body(&prefetch, &ins, &outs, &scratch, grid.len(), dtype)?;
        Ok(KernelProgram {
            name: info.name.to_string(),
            loc: info.loc(),
            launch_loc: at,
            semantics_loc: self.semantics.as_ref().map_or(at, |(_, loc)| *loc),
            dtype,
            body,
            grid: grid.clone(),
            prefetch,
            inputs: ins,
            outputs: outs,
            scratch,
            aliases,
            semantics,
        })
    }

    /// Each alias pairs an existing input and output of one dtype and shape, each used once.
    fn check_aliases(
        &self,
        ins: &[BlockOperand],
        outs: &[BlockOperand],
    ) -> Result<Vec<(usize, usize)>, TraceError> {
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        for &(i, o, loc) in &self.aliases {
            let fail = |message: String| Err(TraceError::Launch { message, loc });
            let (Some(input), Some(output)) = (ins.get(i), outs.get(o)) else {
                return fail(format!(
                    "alias of input #{i} to output #{o}: the kernel has {} inputs and {} outputs",
                    ins.len(),
                    outs.len()
                ));
            };
            if input.dtype != output.dtype || input.array_shape != output.array_shape {
                return fail(format!(
                    "input `{}` ({}{:?}) cannot alias output `{}` ({}{:?}): an aliased pair \
                     shares one buffer, so dtype and shape must match",
                    input.name,
                    input.dtype,
                    input.array_shape,
                    output.name,
                    output.dtype,
                    output.array_shape
                ));
            }
            if let Some(&(pi, po)) = pairs.iter().find(|(pi, po)| *pi == i || *po == o) {
                return fail(format!(
                    "input #{i} or output #{o} is already aliased (input #{pi} -> output #{po})"
                ));
            }
            pairs.push((i, o));
        }
        Ok(pairs)
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
        prefetch: &[PrefetchOperand],
        ins: &[BlockOperand],
        outs: &[BlockOperand],
        scratch: &[ScratchBuffer],
        grid_rank: usize,
        dtype: Option<DType>,
    ) -> Result<Func, TraceError> {
        let info = self.kernel.info();
        let block = |o: &BlockOperand| Type::Ref {
            dtype: o.dtype,
            shape: o.ref_shape(),
            space: o.space,
        };
        let types: Vec<Type> = prefetch
            .iter()
            .map(PrefetchOperand::ref_type)
            .chain(ins.iter().map(block))
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
            prefetch: bound.by_ref().take(prefetch.len()).collect(),
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
    prefetch: &[PrefetchOperand],
) -> Result<BlockOperand, TraceError> {
    let what = format!("{role} `{}`", p.name);
    // An HBM operand is one whole-array block at index 0 (every step sees the same ref).
    let whole = array.to_vec();
    let block = match spec.space {
        MemorySpace::Any => &whole,
        _ => &spec.block_shape,
    };
    let loc = spec.loc;
    if block.len() != array.len() {
        return Err(TraceError::BlockRank {
            what,
            block: block.clone(),
            array: array.to_vec(),
            loc,
        });
    }
    if spec.padded && spec.space == MemorySpace::Any {
        return Err(TraceError::Launch {
            message: format!(
                "{what}: an HBM operand (`BlockSpec::any()`) is one whole-array block, so it \
                 has no edge blocks to pad"
            ),
            loc,
        });
    }
    let element = element_dims(&what, spec, block)?;
    for (dim, (&b, &a)) in block.iter().zip(array).enumerate() {
        // An element dim's block need only fit: its offsets are any `0 ..= a - b`.
        let fits = match element.contains(&dim) {
            true => b <= a,
            false => a % b == 0 || spec.padded,
        };
        if b == 0 || !fits {
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
    if spec.space == MemorySpace::Any && !spec.squeezed.is_empty() {
        return Err(TraceError::Launch {
            message: format!(
                "{what}: an HBM operand (`BlockSpec::any()`) has no blocks, so it has no dims to \
                 squeeze; slice it with `.at(..)` in the DMA instead"
            ),
            loc,
        });
    }
    if let Some(&d) = spec.squeezed.iter().find(|&&d| block.get(d) != Some(&1)) {
        let message = match block.get(d) {
            None => format!("{what}: squeezed dim {d} is not a dim of the block {block:?}"),
            Some(b) => format!(
                "{what}: squeezed dim {d} of block {block:?} has size {b}; a squeezed dim has \
                 block size 1 (one element of the array per step)"
            ),
        };
        return Err(TraceError::Launch { message, loc });
    }
    if let Some((n, at)) = spec.buffers {
        let problem = if spec.space == MemorySpace::Any {
            Some(format!(
                "{what}: an HBM operand (`BlockSpec::any()`) has no window and no pipeline, so \
                 it has no buffers to count; multi-buffer its DMAs by hand"
            ))
        } else if !(1..=2).contains(&n) {
            Some(format!(
                "{what}: `buffered({n})`: the TPU pipeline keeps 1 (synchronous) or 2 \
                 (double-buffered) windows per operand; deeper buffering needs manual DMA \
                 (`BlockSpec::any()` and `async_copy`)"
            ))
        } else {
            None
        };
        if let Some(message) = problem {
            return Err(TraceError::Launch { message, loc: at });
        }
    }
    if let Some(arity) = spec.arity.filter(|&a| a != grid.len()) {
        return Err(TraceError::IndexMapArity {
            what,
            arity,
            grid: grid.to_vec(),
            loc,
        });
    }
    let params: Vec<Type> = vec![Type::index(); grid.len()]
        .into_iter()
        .chain(prefetch.iter().map(PrefetchOperand::ref_type))
        .collect();
    let (session, args) = Session::begin(&params, None);
    let (grid_args, prefetch_args) = args.split_at(grid.len());
    let indices: Vec<Scalar<i32>> = grid_args.iter().copied().map(Scalar::from_val).collect();
    let arrays: Vec<Prefetch<i32>> = prefetch_args.iter().copied().map(Prefetch::new).collect();
    let results = match spec.space {
        MemorySpace::Any => vec![IndexValue::Static(0); block.len()],
        _ => (spec.map)(&indices, &arrays),
    };
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
        squeezed: spec.squeezed.clone(),
        element,
        index_map,
        space: spec.space,
        buffers: spec.buffers.map(|(n, _)| n),
    })
}

/// `spec`'s element dims (`BlockSpec::element`), checked against its `block`: errors name
/// the `.element(..)` call.
fn element_dims(what: &str, spec: &BlockSpec, block: &[usize]) -> Result<Vec<usize>, TraceError> {
    let Some((dims, loc)) = &spec.element else {
        return Ok(Vec::new());
    };
    let problem = if spec.space == MemorySpace::Any {
        Some(format!(
            "{what}: `element({dims:?})` on an HBM operand (`BlockSpec::any()`): it has no \
             blocks, so no offsets to give; slice it with `.at(..)` in the DMA instead"
        ))
    } else if spec.padded {
        Some(format!(
            "{what}: `element({dims:?})` with `padded()`: an element offset keeps its block \
             inside the array, so there is no edge block to pad; drop one of the two"
        ))
    } else if let Some(&d) = dims.iter().find(|&&d| d >= block.len()) {
        Some(format!(
            "{what}: element dim {d} is not a dim of the rank-{} block {block:?}",
            block.len()
        ))
    } else if let Some(&d) = dims.iter().find(|d| spec.squeezed.contains(d)) {
        Some(format!(
            "{what}: element dim {d} is also squeezed; a squeezed dim has block size 1, so its \
             index already is an element offset: drop it from `element(..)`"
        ))
    } else {
        None
    };
    match problem {
        Some(message) => Err(TraceError::Launch { message, loc: *loc }),
        None => Ok(dims.clone()),
    }
}

/// The scalar-prefetch operands: each declared `i32` (SMEM words) and handed an `i32` array.
fn prefetch_operands(
    kernel: &'static str,
    params: &[&ParamInfo],
    arrays: &[(DType, Vec<usize>)],
    at: Loc,
) -> Result<Vec<PrefetchOperand>, TraceError> {
    params
        .iter()
        .zip(arrays)
        .map(|(p, (dtype, shape))| {
            let declared = p.dtype.unwrap_or(*dtype);
            if declared != DType::I32 {
                return Err(TraceError::Launch {
                    message: format!(
                        "kernel `{kernel}`: scalar-prefetch `{}` is declared {declared}; scalar \
                         prefetch takes i32 arrays (pass floats as a blocked input)",
                        p.name
                    ),
                    loc: at,
                });
            }
            if *dtype != declared {
                return Err(mismatch(
                    kernel,
                    format!("scalar-prefetch `{}` as declared", p.name),
                    declared,
                    *dtype,
                    at,
                ));
            }
            Ok(PrefetchOperand {
                name: p.name.to_string(),
                dtype: *dtype,
                shape: shape.clone(),
            })
        })
        .collect()
}

/// Index maps are IR functions of a static grid: evaluated over the whole grid now, a block
/// index out of range is an error at the BlockSpec's line instead of a clamped block on the
/// CPU forms and a silent out-of-bounds window on a TPU. Maps that read scalar-prefetch
/// arrays depend on data: the interpreter checks those when it runs.
fn check_block_indices(o: &BlockOperand, grid: &[usize]) -> Result<(), TraceError> {
    let map = &o.index_map;
    if !crate::ir::index_map_checked_at_trace(map, grid) {
        return Ok(());
    }
    crate::interp::check_block_indices(o, grid).map_err(|e| match e {
        crate::interp::InterpError::BlockOutOfBounds {
            grid_index,
            block_index,
            ..
        } if !o.element.is_empty() => TraceError::Launch {
            message: format!(
                "`{}`: at grid index {grid_index:?} the index map gives {block_index:?} (element \
                 offsets in dims {:?}, block indices in the others), out of range for blocks \
                 of {:?} in an array of {:?} (largest in range per dim: {:?})",
                o.name,
                o.element,
                o.block_shape,
                o.array_shape,
                (0..o.block_shape.len())
                    .map(|d| o.max_index(d).unwrap_or(0))
                    .collect::<Vec<_>>()
            ),
            loc: map.loc,
        },
        crate::interp::InterpError::BlockOutOfBounds {
            grid_index,
            block_index,
            ..
        } => TraceError::Launch {
            message: format!(
                "`{}`: at grid index {grid_index:?} the index map gives block {block_index:?}, \
                 out of range for blocks of {:?} in an array of {:?} (block counts {:?})",
                o.name,
                o.block_shape,
                o.array_shape,
                o.blocks_per_dim()
            ),
            loc: map.loc,
        },
        other => TraceError::Launch {
            message: format!("`{}`: evaluating the index map failed: {other}", o.name),
            loc: map.loc,
        },
    })
}
