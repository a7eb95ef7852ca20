//! `KernelProgram`: a traced, checked kernel launch. This is what the emitters (StableHLO,
//! Mosaic), the interpreter and the runtime consume.

use super::{hash_func_into, Fnv1a, Func, Loc, MemorySpace, Region, Type, ValueId};
use crate::dtype::DType;
use std::fmt;

/// How a grid axis may be scheduled (Mosaic's `dimension_semantics`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DimensionSemantics {
    /// Steps are independent (may be split across cores).
    Parallel,
    /// Steps are independent and this axis is split across the chip's TensorCores
    /// (megacore; Pallas' `pltpu.CORE_PARALLEL`): each core runs its share of the axis.
    /// Only on generations with more than one TensorCore per chip (see
    /// `TpuGeneration::tensor_cores_per_chip`); the interpreter and the CPU forms run it
    /// like `Parallel`.
    CoreParallel,
    /// Steps run in order (reductions over this axis, accumulators in scratch).
    Arbitrary,
}

impl DimensionSemantics {
    /// The name of Mosaic's `#tpu.dimension_semantics<..>`.
    pub fn name(self) -> &'static str {
        match self {
            DimensionSemantics::Parallel => "parallel",
            DimensionSemantics::CoreParallel => "core_parallel",
            DimensionSemantics::Arbitrary => "arbitrary",
        }
    }

    /// Whether steps along the axis are independent (`Parallel` or `CoreParallel`).
    pub fn is_parallel(self) -> bool {
        self != DimensionSemantics::Arbitrary
    }
}

/// One blocked operand (an input or an output) of a launch.
#[derive(Clone, PartialEq)]
pub struct BlockOperand {
    /// The kernel parameter's name.
    pub name: String,
    pub dtype: DType,
    /// The whole array's shape.
    pub array_shape: Vec<usize>,
    /// The block's shape; each dim divides the array's (except element dims, whose block
    /// only has to fit in the array, and padded edge blocks).
    pub block_shape: Vec<usize>,
    /// Block dims the kernel's ref lacks (Pallas' `None`), sorted; each has block size 1.
    pub squeezed: Vec<usize>,
    /// Dims whose index-map result is an element offset, not a block index
    /// (`BlockSpec::element`, Pallas' `pl.Element`), sorted; none squeezed.
    pub element: Vec<usize>,
    /// Grid indices (one `i32` param per grid axis), then one SMEM ref param per
    /// scalar-prefetch operand -> one `i32` result per block dim: a block index (element
    /// offset = index * block dim), or for the dims of `element` the element offset itself
    /// (`0 ..= array dim - block dim`). Verified.
    pub index_map: Func,
    /// `Vmem` (blocked, pipelined by the grid) or `Any` (left in HBM: the block is the whole
    /// array at block index 0, and the body reaches it by DMA only).
    pub space: MemorySpace,
    /// The pipeline's window buffers when given (`BlockSpec::buffered`: 1 or 2); `None` is
    /// the default double buffering, emitted with no `pipeline_mode`.
    pub buffers: Option<usize>,
}

/// Grids up to this many steps have every block index checked at trace time (~1 us per step
/// and operand in the interpreter's evaluator); larger ones are left to the interpreter.
const MAX_CHECKED_STEPS: usize = 1 << 14;

/// Whether the tracer checks every block index map `map` selects over `grid` (the StableHLO
/// forms' checked mode checks the others when the kernel runs): maps that read no
/// scalar-prefetch data, over grids of up to [`MAX_CHECKED_STEPS`] steps.
pub fn index_map_checked_at_trace(map: &Func, grid: &[usize]) -> bool {
    let prefetch_params = &map.params()[grid.len().min(map.params().len())..];
    let reads_prefetch = !prefetch_params.is_empty() && uses_any(&map.body, prefetch_params);
    !reads_prefetch && grid.iter().product::<usize>() <= MAX_CHECKED_STEPS
}

/// Whether any op of `region` (nested regions included) reads one of `values`.
fn uses_any(region: &Region, values: &[ValueId]) -> bool {
    region.ops.iter().any(|op| {
        op.kind.operands().iter().any(|v| values.contains(v))
            || op.kind.regions().into_iter().any(|r| uses_any(r, values))
    })
}

/// As derived, but `element` only where there are element dims: the StableHLO snapshots
/// (`stablehlo/kernel/snapshot.rs`) name programs by this text, so launches without them keep
/// the names they had before element dims existed and stay comparable across builds.
impl fmt::Debug for BlockOperand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("BlockOperand");
        d.field("name", &self.name)
            .field("dtype", &self.dtype)
            .field("array_shape", &self.array_shape)
            .field("block_shape", &self.block_shape)
            .field("squeezed", &self.squeezed);
        if !self.element.is_empty() {
            d.field("element", &self.element);
        }
        d.field("index_map", &self.index_map)
            .field("space", &self.space)
            .field("buffers", &self.buffers)
            .finish()
    }
}

impl BlockOperand {
    /// VMEM buffers the pipeline keeps for the window (none for an HBM operand).
    pub fn window_buffers(&self) -> usize {
        match self.space {
            MemorySpace::Any => 0,
            _ => self.buffers.unwrap_or(2),
        }
    }

    /// The shape of the kernel's ref: the block without its squeezed dims.
    pub fn ref_shape(&self) -> Vec<usize> {
        self.block_shape
            .iter()
            .enumerate()
            .filter(|(d, _)| !self.squeezed.contains(d))
            .map(|(_, &b)| b)
            .collect()
    }

    /// Number of blocks along each dim (the last one padded where the block does not divide
    /// the array: `BlockSpec::padded`).
    pub fn blocks_per_dim(&self) -> Vec<usize> {
        self.array_shape
            .iter()
            .zip(&self.block_shape)
            .map(|(a, b)| a.div_ceil(*b))
            .collect()
    }

    /// Whether dim `d`'s index-map result is an element offset (`BlockSpec::element`).
    pub fn is_element(&self, d: usize) -> bool {
        self.element.contains(&d)
    }

    /// The largest index-map result along dim `d` that keeps the block inside the array
    /// (padded: the last, partial block): `array - block` elements for an element dim,
    /// else the last block's index. `None` when no result is in range.
    pub fn max_index(&self, d: usize) -> Option<usize> {
        let (a, b) = (*self.array_shape.get(d)?, *self.block_shape.get(d)?);
        match self.is_element(d) {
            true => a.checked_sub(b),
            false => a.div_ceil(b).checked_sub(1),
        }
    }

    /// The element offset along dim `d` of index-map result `index`.
    pub fn start(&self, d: usize, index: usize) -> usize {
        match self.is_element(d) {
            true => index,
            false => index * self.block_shape[d],
        }
    }

    /// The array's shape rounded up to whole blocks (element dims as they are: their
    /// blocks stay inside the array).
    pub fn padded_shape(&self) -> Vec<usize> {
        self.blocks_per_dim()
            .iter()
            .zip(&self.block_shape)
            .enumerate()
            .map(|(d, (n, b))| match self.is_element(d) {
                true => self.array_shape[d],
                false => n * b,
            })
            .collect()
    }

    /// Whether some dim ends in a partial block.
    pub fn is_padded(&self) -> bool {
        self.padded_shape() != self.array_shape
    }
}

/// A scalar-prefetch operand: a whole `i32` array in SMEM, passed before the blocked inputs
/// and readable by the body and by every index map (which makes index maps data-dependent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefetchOperand {
    /// The kernel parameter's name.
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl PrefetchOperand {
    /// The type of its ref params (in the body and in index maps).
    pub fn ref_type(&self) -> Type {
        Type::Ref {
            dtype: self.dtype,
            shape: self.shape.clone(),
            space: MemorySpace::Smem,
        }
    }
}

/// A scratch buffer: allocated once per launch, persists across grid steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScratchBuffer {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub space: MemorySpace,
}

/// A kernel traced for one launch: body, grid, operands and scratch.
///
/// The body's params are refs, in this order: one per scalar-prefetch operand (its whole
/// shape, SMEM), one per input (block shape, VMEM), one per output (block shape, VMEM), one
/// per scratch buffer (its shape and memory space). It has no results. The program's
/// arguments are the prefetch arrays, then the inputs. `program_id`/`num_programs` axes are below `grid.len()`.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelProgram {
    /// The kernel's name (`KernelInfo::name`).
    pub name: String,
    /// Where the kernel fn is defined.
    pub loc: Loc,
    /// Where the launch was traced (the user's `trace_program`/`.run` call).
    pub launch_loc: Loc,
    /// Where the dimension semantics were given (the `.semantics(..)` call; the launch's
    /// location when they are the default).
    pub semantics_loc: Loc,
    /// The dtype the generic parameter was instantiated with, if the kernel is generic.
    pub dtype: Option<DType>,
    /// The verified kernel body.
    pub body: Func,
    /// Grid extent per axis; steps run in lexicographic order (last axis fastest).
    pub grid: Vec<usize>,
    pub prefetch: Vec<PrefetchOperand>,
    pub inputs: Vec<BlockOperand>,
    pub outputs: Vec<BlockOperand>,
    pub scratch: Vec<ScratchBuffer>,
    /// `(input, output)` pairs sharing one buffer (Pallas' `input_output_aliases`; indices
    /// among the blocked inputs and the outputs): the output starts as the input's contents,
    /// so blocks the kernel does not write keep them (an in-place update).
    pub aliases: Vec<(usize, usize)>,
    /// One per grid axis.
    pub semantics: Vec<DimensionSemantics>,
}

impl KernelProgram {
    /// Stable across runs and independent of value numbering and source locations: a
    /// cache key (together with device and plugin).
    pub fn structural_hash(&self) -> u64 {
        let mut h = Fnv1a::default();
        h.str(&self.name);
        h.str(self.dtype.map_or("", DType::name));
        hash_func_into(&self.body, &mut h);
        h.dims(&self.grid);
        h.usize(self.prefetch.len());
        for p in &self.prefetch {
            h.str(&p.name);
            h.str(p.dtype.name());
            h.dims(&p.shape);
        }
        for list in [&self.inputs, &self.outputs] {
            h.usize(list.len());
            for o in list {
                h.str(&o.name);
                h.str(o.dtype.name());
                h.dims(&o.array_shape);
                h.dims(&o.block_shape);
                h.dims(&o.squeezed);
                // Only where given, so that the keys of launches without them stay as they were.
                if !o.element.is_empty() {
                    h.str("element");
                    h.dims(&o.element);
                }
                h.str(o.space.name());
                h.usize(o.buffers.unwrap_or(0));
                hash_func_into(&o.index_map, &mut h);
            }
        }
        h.usize(self.scratch.len());
        for s in &self.scratch {
            h.str(&s.name);
            h.str(s.dtype.name());
            h.dims(&s.shape);
            h.str(s.space.name());
        }
        self.semantics.iter().for_each(|s| h.str(s.name()));
        h.usize(self.aliases.len());
        for &(i, o) in &self.aliases {
            h.usize(i);
            h.usize(o);
        }
        h.finish()
    }

    /// Index of the body param of input `k` (prefetch refs come first).
    pub fn input_param(&self, k: usize) -> usize {
        self.prefetch.len() + k
    }

    /// Total number of grid steps.
    pub fn num_steps(&self) -> usize {
        self.grid.iter().product()
    }

    /// For a launch with padded edge blocks: the same launch on arrays rounded up to whole
    /// blocks, which the interpreter and the StableHLO forms run between padding the inputs
    /// and cropping the outputs (so writes past an array's end are dropped). `None` when
    /// every block divides its array.
    pub fn padded_form(&self) -> Option<KernelProgram> {
        let operands = self.inputs.iter().chain(&self.outputs);
        if !operands.into_iter().any(BlockOperand::is_padded) {
            return None;
        }
        let mut inner = self.clone();
        for o in inner.inputs.iter_mut().chain(inner.outputs.iter_mut()) {
            o.array_shape = o.padded_shape();
        }
        Some(inner)
    }
}

impl fmt::Display for KernelProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sem: Vec<&str> = self.semantics.iter().map(|s| s.name()).collect();
        writeln!(
            f,
            "kernel {} grid {:?} semantics [{}]",
            self.name,
            self.grid,
            sem.join(", ")
        )?;
        for p in &self.prefetch {
            writeln!(f, "prefetch {}: {}{:?} in smem", p.name, p.dtype, p.shape)?;
        }
        for (role, list) in [("input", &self.inputs), ("output", &self.outputs)] {
            for o in list {
                if o.space == MemorySpace::Any {
                    writeln!(
                        f,
                        "{role} {}: {}{:?} in hbm",
                        o.name, o.dtype, o.array_shape
                    )?;
                    continue;
                }
                writeln!(
                    f,
                    "{role} {}: {}{:?} in blocks {:?}{}",
                    o.name,
                    o.dtype,
                    o.array_shape,
                    o.block_shape,
                    if o.squeezed.is_empty() {
                        String::new()
                    } else {
                        format!(" squeezing {:?}", o.squeezed)
                    }
                )?;
                if let Some(n) = o.buffers {
                    writeln!(f, "  buffered({n})")?;
                }
                if !o.element.is_empty() {
                    writeln!(f, "  element offsets in dims {:?}", o.element)?;
                }
                write!(f, "{}", o.index_map)?;
            }
        }
        for (i, o) in &self.aliases {
            writeln!(f, "alias input #{i} -> output #{o}")?;
        }
        for s in &self.scratch {
            writeln!(
                f,
                "scratch {}: {}{:?} in {}",
                s.name,
                s.dtype,
                s.shape,
                s.space.name()
            )?;
        }
        write!(f, "{}", self.body)
    }
}
