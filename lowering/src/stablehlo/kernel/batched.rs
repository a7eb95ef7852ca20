//! The batched form: all steps of the parallel grid axes at once, as `vmap` over the grid.
//! Each operand array is reshaped and transposed into `grid axes it uses ++ block` (one block
//! per grid step, in front), the body runs on these batched blocks (see `body.rs`), and
//! outputs are transposed back. An input whose index map is no such re-layout (it reads
//! scalar-prefetch data, or computes `2 - i`) has its map evaluated for all steps at once and
//! each step's block gathered ([`gathered_blocks`]). A block's squeezed dims (size 1) are
//! reshaped away where the body's refs lack them, and back for the outputs. `arbitrary` axes,
//! if any, stay a `while` loop (in the TPU's order) around the batched body; outputs and
//! scratch are carried through it, one block per parallel grid point. All-parallel grids
//! whose body cannot tell steps apart skip the re-layout altogether: the body runs once on
//! the whole arrays (`folded.rs`).
//!
//! Legal when every step's output blocks are a fixed re-layout of the arrays and parallel
//! steps cannot observe each other (checked by [`check_layout`]):
//! - every output's index-map result is a grid index itself (distinct grid axes within one
//!   operand, array dim = grid extent * block dim) or a constant block index;
//! - every output uses every parallel grid axis of extent > 1 (each output block is written
//!   by one parallel point) and has constant index 0 only on dims its block covers whole;
//!
//! and when the body's per-step control flow along parallel axes can be batched: an `if`
//! whose condition depends on parallel `program_id`s or block contents runs both branches
//! and selects (not when a branch has a `while`, or, checked, traced starts); `fori` bounds
//! must not depend on them, nor slice offsets, except into refs the same in every step (a
//! gather then; the body translator reports the others as it meets them). `program_id` of a
//! parallel axis is an iota over that axis; of a looped axis, the loop's index.
//!
//! Scratch is per parallel point here but shared by all steps in the grid loop: the forms
//! agree for kernels that keep the promise `parallel` makes (Pallas': steps of a parallel
//! axis may run on different cores, each with its own scratch), i.e. that do not carry
//! scratch contents from one parallel point to the next, as the accumulator pattern
//! (`if program_id(k) == 0 { acc = 0 }`) does not. The result is then the grid loop's: each
//! step's ops run on the same block values, only many steps side by side. `Form::Auto` only
//! batches a grid with `arbitrary` axes once `private_scratch.rs` has proved that promise.

use super::body::{gather_windows, BodyEmitter};
use super::checks::{block_needs_check, BoundsCheck, Checker};
use super::error::EmitError;
use super::folded;
use super::grid_loop::grid_indices;
use super::plan::{Operand, Plan};
use crate::dtype::DType;
use crate::ir::discharge::{discharge, Discharged};
use crate::ir::{Literal, OpKind, Operation, ValueId};
use crate::stablehlo::{FuncBuilder, Module, TensorType, Value};

/// How one dim of an operand's block moves across the grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum DimMap {
    /// Block index = grid index along this axis.
    Axis(usize),
    /// Block index fixed for every step.
    Const(usize),
}

/// `Ok` when the launch's layout allows the batched form, else the reason it does not.
fn check_layout(plan: &Plan) -> Result<(), String> {
    if !plan.aliases.is_empty() {
        return Err("an output aliases an input (blocks it skips keep the input)".into());
    }
    if plan.manual_dma {
        return Err("it copies data by DMA (its steps run one by one)".into());
    }
    for (k, o) in plan.outputs.iter().enumerate() {
        let maps = dim_maps(plan, o).map_err(|e| format!("output #{k}: {e}"))?;
        for a in (0..plan.grid.len()).filter(|&a| plan.parallel[a]) {
            if !maps.contains(&DimMap::Axis(a)) && plan.grid[a] > 1 {
                return Err(format!(
                    "output #{k}: its index map ignores grid axis {a}, so steps revisit its blocks"
                ));
            }
        }
        for (j, m) in maps.iter().enumerate() {
            if matches!(m, DimMap::Const(_)) && o.block[j] != o.array[j] {
                return Err(format!("output #{k}: dim {j} has a constant block index but its block does not cover the array"));
            }
        }
    }
    Ok(())
}

/// Reads an index map as one [`DimMap`] per array dim, or says why it is not that simple.
pub(super) fn dim_maps(plan: &Plan, o: &Operand) -> Result<Vec<DimMap>, String> {
    // Element offsets (`BlockSpec::element`) may overlap or leave gaps: no re-layout. Inputs
    // are gathered instead; an output refuses the batched, folded and contracted forms.
    if let Some(d) = o.element.first() {
        return Err(format!(
            "dim {d} gives element offsets (`element`), not block indices"
        ));
    }
    let map = o.index_map;
    let defining = |v| {
        map.body
            .ops
            .iter()
            .find(|op: &&Operation| op.results.contains(&v))
    };
    let mut out = Vec::new();
    for (j, &r) in map.results().iter().enumerate() {
        let m = if let Some(a) = map.params().iter().position(|&p| p == r) {
            DimMap::Axis(a)
        } else {
            match defining(r).map(|op| &op.kind) {
                Some(OpKind::Constant {
                    value: Literal::Int(c),
                }) if *c >= 0 => DimMap::Const(*c as usize),
                _ => {
                    return Err(format!(
                        "block index {j} is neither a grid index nor a constant"
                    ))
                }
            }
        };
        match m {
            DimMap::Axis(a) if out.contains(&m) => {
                return Err(format!("grid axis {a} indexes two dims"))
            }
            DimMap::Axis(a) if plan.grid[a] * o.block[j] != o.array[j] => {
                return Err(format!(
                    "dim {j}: grid extent {} x block {} != array {}",
                    plan.grid[a], o.block[j], o.array[j]
                ))
            }
            DimMap::Const(c) if (c + 1) * o.block[j] > o.array[j] => {
                return Err(format!("dim {j}: constant block {c} is out of bounds"))
            }
            _ => {}
        }
        out.push(m);
    }
    Ok(out)
}

/// The module, and the bounds checks of the body's traced starts when `checked` (then it
/// returns their state last; the folded layout, which has no traced starts, is not tried).
/// `checking`: the launch runs checked, so blocks only known when it runs (index maps that
/// read scalar-prefetch data) must be checked, which only the grid loop does.
pub(super) fn emit(
    plan: &Plan,
    checked: bool,
    checking: bool,
) -> Result<(Module, Vec<BoundsCheck>), EmitError> {
    let not_batchable = |reason: String| EmitError::NotBatchable {
        kernel: plan.name.to_string(),
        reason,
    };
    check_layout(plan).map_err(not_batchable)?;
    let grid = plan.grid.clone();
    let par: Vec<usize> = (0..grid.len()).filter(|&a| plan.parallel[a]).collect();
    let seq: Vec<usize> = (0..grid.len()).filter(|&a| !plan.parallel[a]).collect();
    let extents = |axes: &[usize]| axes.iter().map(|&a| grid[a]).collect::<Vec<_>>();
    // Per input: its index map read as a re-layout, or why it is not one (then each step's
    // block is gathered).
    let in_maps: Vec<_> = plan.inputs.iter().map(|o| dim_maps(plan, o)).collect();
    for (o, maps) in plan.inputs.iter().zip(&in_maps) {
        if maps.is_err() && checking && block_needs_check(plan, o) {
            return Err(not_batchable(format!(
                "input `{}`: its blocks are only known when the kernel runs, and checked then by the grid loop",
                o.name
            )));
        }
    }
    let body = discharge(plan.body)?;
    if seq.is_empty() && !checked && plan.prefetch.is_empty() {
        let all_maps: Option<Vec<Vec<DimMap>>> = in_maps
            .iter()
            .map(|m| m.as_ref().ok().cloned())
            .chain(plan.outputs.iter().map(|o| dim_maps(plan, o).ok()))
            .collect();
        if let Some(module) = match all_maps {
            Some(maps) => folded::emit(plan, &body, &maps)?,
            None => None,
        } {
            return Ok((module, Vec::new()));
        }
    }
    let mut f = FuncBuilder::new("main");
    let prefetch: Vec<Value> = plan
        .prefetch
        .iter()
        .map(|a| f.arg(TensorType::new(a.shape.clone(), a.dtype)))
        .collect();
    let args: Vec<Value> = plan
        .inputs
        .iter()
        .map(|o| f.arg(TensorType::new(o.array.clone(), o.dtype)))
        .collect();
    // Inputs are re-laid out once, before any loop.
    let mut inputs = Vec::new();
    for ((o, x), maps) in plan.inputs.iter().zip(&args).zip(&in_maps) {
        let input = match maps {
            // Blocks that differ between sequential steps are moved to the front one step at
            // a time, in the loop, where XLA can fold that transpose into the one a `dot`
            // makes of them (the grouped matmul's weights: [group, k, n] sliced at the group
            // and contracted along k keep their own layout).
            Ok(maps)
                if maps
                    .iter()
                    .any(|m| matches!(m, DimMap::Axis(a) if seq.contains(a))) =>
            {
                let (split, perm, axes) = split_blocks(&mut f, &grid, o, maps, x)?;
                Input {
                    param: o.param,
                    blocks: split,
                    axes,
                    late: Some((perm, o.view.clone())),
                }
            }
            _ => {
                let (blocks, axes) = match maps {
                    Ok(maps) => to_blocks(&mut f, &grid, o, maps, x)?,
                    Err(_) => gathered_blocks(&mut f, plan, o, x, &prefetch)?,
                };
                // The body's ref is the block without its squeezed (size-1) dims.
                let views = with_block(&mut f, &blocks, axes.len(), &o.view)?;
                Input {
                    param: o.param,
                    blocks: views,
                    axes,
                    late: None,
                }
            }
        };
        inputs.push(input);
    }
    // Outputs are carried as `parallel axes ++ sequential axes they use ++ block`, scratch as
    // `parallel axes ++ shape`: one per parallel grid point.
    let mut layouts = Vec::new();
    let mut init = Vec::new();
    for o in &plan.outputs {
        let maps = dim_maps(plan, o).map_err(EmitError::internal)?;
        let layout: Vec<usize> = par
            .iter()
            .copied()
            .chain(
                seq.iter()
                    .copied()
                    .filter(|a| maps.contains(&DimMap::Axis(*a))),
            )
            .collect();
        init.push(f.zeros(TensorType::new(
            [extents(&layout), o.view.clone()].concat(),
            o.dtype,
        ))?);
        layouts.push(layout);
    }
    for s in &plan.scratch {
        init.push(f.zeros(TensorType::new(
            [extents(&par), s.shape.clone()].concat(),
            s.dtype,
        ))?);
    }
    let mut checks = checked
        .then(|| Checker::new(&mut f, grid.len()))
        .transpose()?;
    init.extend(checks.as_ref().map(Checker::state).unwrap_or_default());
    let ctx = Step {
        plan,
        body: &body,
        prefetch: &prefetch,
        par: &par,
        inputs: &inputs,
        layouts: &layouts,
    };
    let carried = if seq.is_empty() {
        ctx.run(&mut f, &[], &init, &mut checks)?
    } else {
        let lo = f.scalar(DType::I32, 0.0)?;
        let hi = f.scalar(DType::I32, extents(&seq).iter().product::<usize>() as f64)?;
        let refs: Vec<&Value> = init.iter().collect();
        f.fori_loop(&lo, &hi, &refs, |f, s, c| {
            let idx = grid_indices(f, s, &extents(&seq))?;
            let looped: Vec<(usize, Value)> = seq.iter().copied().zip(idx).collect();
            ctx.run(f, &looped, c, &mut checks)
        })?
    };
    let mut outs = Vec::new();
    for ((o, views), layout) in plan.outputs.iter().zip(&carried).zip(&layouts) {
        let maps = dim_maps(plan, o).map_err(EmitError::internal)?;
        let blocks = with_block(&mut f, views, layout.len(), &o.block)?;
        outs.push(from_blocks(&mut f, o, &maps, &blocks, layout)?);
    }
    let mut refs: Vec<&Value> = outs.iter().collect();
    let table = match checks {
        Some(c) => {
            refs.extend(&carried[carried.len() - c.state_len()..]);
            c.table
        }
        None => Vec::new(),
    };
    Ok((f.finish(&refs)?, table))
}

/// What every step of the sequential axes needs.
struct Step<'p, 'a> {
    plan: &'p Plan<'a>,
    body: &'p Discharged<'a>,
    /// The scalar-prefetch arrays, the same in every step.
    prefetch: &'p [Value],
    par: &'p [usize],
    /// Per input: its ref param, its blocks and the grid axes their leading dims stand for.
    inputs: &'p [Input],
    /// Per output: the grid axes its carried blocks' leading dims stand for.
    layouts: &'p [Vec<usize>],
}

impl Step<'_, '_> {
    /// The body at sequential index `looped` for all parallel points: next outputs, scratch
    /// (and check state).
    fn run(
        &self,
        f: &mut FuncBuilder,
        looped: &[(usize, Value)],
        carried: &[Value],
        checks: &mut Option<Checker>,
    ) -> Result<Vec<Value>, EmitError> {
        let plan = self.plan;
        let carried = Checker::split_state(checks, carried)?;
        let mut body =
            BodyEmitter::batched(self.body, plan.grid.clone(), self.par.to_vec(), looped);
        for (a, x) in plan.prefetch.iter().zip(self.prefetch) {
            body.set_ref(a.param, x.clone(), Vec::new());
        }
        for x in self.inputs {
            let (v, rest) = match &x.late {
                None => at_step(f, &x.blocks, &x.axes, looped)?,
                Some((perm, view)) => permuted_at_step(f, &x.blocks, &x.axes, perm, view, looped)?,
            };
            body.set_ref(x.param, v, rest);
        }
        let (outs, scratch) = carried.split_at(plan.outputs.len());
        for ((o, c), layout) in plan.outputs.iter().zip(outs).zip(self.layouts) {
            let (v, rest) = at_step(f, c, layout, looped)?;
            body.set_ref(o.param, v, rest);
        }
        for (s, c) in plan.scratch.iter().zip(scratch) {
            body.set_ref(s.param, c.clone(), self.par.to_vec());
        }
        body.set_checks(checks.take());
        body.emit_body(f)?;
        *checks = body.take_checks();
        let mut next = Vec::new();
        for ((o, c), layout) in plan.outputs.iter().zip(outs).zip(self.layouts) {
            let v = body.ref_contents(f, o.param)?;
            next.push(if layout.len() == self.par.len() {
                v
            } else {
                write_at_step(f, c, &v, layout, looped)?
            });
        }
        for s in &plan.scratch {
            next.push(body.ref_contents(f, s.param)?);
        }
        next.extend(checks.as_ref().map(Checker::state).unwrap_or_default());
        Ok(next)
    }
}

/// An input's blocks for the body: `axes ++ view`, or (`late`) still in the array's own
/// layout split into `(grid, block)` dims, with the permutation that takes them to
/// `axes ++ block` and the view.
struct Input {
    param: ValueId,
    blocks: Value,
    axes: Vec<usize>,
    late: Option<(Vec<usize>, Vec<usize>)>,
}

/// `blocks` (leading dims standing for `axes`) at this step's index of the looped axes: those
/// dims are sliced to one and dropped. Returns the value and the axes it still carries.
fn at_step(
    f: &mut FuncBuilder,
    blocks: &Value,
    axes: &[usize],
    looped: &[(usize, Value)],
) -> Result<(Value, Vec<usize>), EmitError> {
    let perm: Vec<usize> = (0..blocks.rank()).collect();
    let block = &blocks.shape()[axes.len()..];
    permuted_at_step(f, blocks, axes, &perm, block, looped)
}

/// [`at_step`] of blocks whose dims `perm` takes to `axes ++ block` (a `late` input's, still
/// in the array's layout): the looped axes' dims sliced to this step's index, moved behind
/// the others' and dropped, the block reshaped to `view`. Transposes and reshapes that
/// change nothing are not emitted.
fn permuted_at_step(
    f: &mut FuncBuilder,
    blocks: &Value,
    axes: &[usize],
    perm: &[usize],
    view: &[usize],
    looped: &[(usize, Value)],
) -> Result<(Value, Vec<usize>), EmitError> {
    let index = |a: &usize| looped.iter().find(|(x, _)| x == a).map(|(_, v)| v.clone());
    let shape = blocks.shape().to_vec();
    if !axes.iter().any(|a| index(a).is_some()) {
        let moved = f.transpose(blocks, perm)?;
        let lead = perm[..axes.len()].iter().map(|&d| shape[d]);
        let shape: Vec<usize> = lead.chain(view.iter().copied()).collect();
        return Ok((f.reshape(&moved, &shape)?, axes.to_vec()));
    }
    let zero = f.scalar(DType::I32, 0.0)?;
    let mut starts = vec![zero; shape.len()];
    let mut sizes = shape.clone();
    let (mut rest, mut lead) = (Vec::new(), Vec::new());
    for (a, &d) in axes.iter().zip(perm) {
        match index(a) {
            Some(i) => {
                starts[d] = i;
                sizes[d] = 1;
            }
            None => {
                rest.push(*a);
                lead.push(shape[d]);
            }
        }
    }
    let refs: Vec<&Value> = starts.iter().collect();
    let window = f.dynamic_slice(blocks, &refs, &sizes)?;
    let moved = f.transpose(&window, perm)?;
    Ok((f.reshape(&moved, &[lead, view.to_vec()].concat())?, rest))
}

/// `carried` with this step's blocks `v` (leading dims: the parallel axes) written at the
/// looped axes' indices.
fn write_at_step(
    f: &mut FuncBuilder,
    carried: &Value,
    v: &Value,
    layout: &[usize],
    looped: &[(usize, Value)],
) -> Result<Value, EmitError> {
    let zero = f.scalar(DType::I32, 0.0)?;
    let mut shape = Vec::new();
    let mut starts = Vec::new();
    let mut own = v.shape().iter();
    for (d, &n) in carried.shape().iter().enumerate() {
        match layout
            .get(d)
            .and_then(|a| looped.iter().find(|(x, _)| x == a))
        {
            Some((_, i)) => {
                shape.push(1);
                starts.push(i.clone());
            }
            None => {
                shape.push(own.next().copied().unwrap_or(n));
                starts.push(zero.clone());
            }
        }
    }
    let update = f.reshape(v, &shape)?;
    let refs: Vec<&Value> = starts.iter().collect();
    Ok(f.dynamic_update_slice(carried, &update, &refs)?)
}

/// `v` (`lead` leading grid dims, then a block or its view) with its block dims reshaped to
/// `block`: the squeezed size-1 dims dropped or put back. As it is when they agree.
pub(super) fn with_block(
    f: &mut FuncBuilder,
    v: &Value,
    lead: usize,
    block: &[usize],
) -> Result<Value, EmitError> {
    if &v.shape()[lead..] == block {
        return Ok(v.clone());
    }
    Ok(f.reshape(v, &[&v.shape()[..lead], block].concat())?)
}

/// `array` with each constant-index dim sliced to its one block (the other dims whole).
pub(super) fn const_blocks(
    f: &mut FuncBuilder,
    o: &Operand,
    maps: &[DimMap],
    x: &Value,
) -> Result<Value, EmitError> {
    let r = o.array.len();
    let lo: Vec<usize> = maps
        .iter()
        .zip(&o.block)
        .map(|(m, b)| if let DimMap::Const(c) = m { c * b } else { 0 })
        .collect();
    let hi: Vec<usize> = (0..r)
        .map(|j| {
            if let DimMap::Const(_) = maps[j] {
                lo[j] + o.block[j]
            } else {
                o.array[j]
            }
        })
        .collect();
    if lo.iter().all(|&l| l == 0) && hi == o.array {
        return Ok(x.clone());
    }
    Ok(f.slice(x, &lo, &hi, &vec![1; r])?)
}

/// `array` -> `used grid axes ++ block`: slice constant blocks, split grid-mapped dims into
/// (grid, block) and move the grid parts to the front, in axis order. Returns the used axes
/// (the blocks are the same along the others, so they are not materialized).
fn to_blocks(
    f: &mut FuncBuilder,
    grid: &[usize],
    o: &Operand,
    maps: &[DimMap],
    x: &Value,
) -> Result<(Value, Vec<usize>), EmitError> {
    let (x, perm, used) = split_blocks(f, grid, o, maps, x)?;
    Ok((f.transpose(&x, &perm)?, used))
}

/// [`to_blocks`] before its transpose: the array with constant blocks sliced and grid-mapped
/// dims split into `(grid, block)`, the permutation to `used ++ block`, and the used axes.
fn split_blocks(
    f: &mut FuncBuilder,
    grid: &[usize],
    o: &Operand,
    maps: &[DimMap],
    x: &Value,
) -> Result<(Value, Vec<usize>, Vec<usize>), EmitError> {
    let x = const_blocks(f, o, maps, x)?;
    // Split: each Axis(a) dim becomes (grid[a], block[j]).
    let mut split = Vec::new();
    let mut grid_pos = vec![None; grid.len()];
    let mut block_pos = Vec::with_capacity(maps.len());
    for (j, m) in maps.iter().enumerate() {
        if let DimMap::Axis(a) = m {
            grid_pos[*a] = Some(split.len());
            split.push(grid[*a]);
        }
        block_pos.push(split.len());
        split.push(o.block[j]);
    }
    let x = f.reshape(&x, &split)?;
    let used: Vec<usize> = (0..grid.len()).filter(|&a| grid_pos[a].is_some()).collect();
    let perm: Vec<usize> = used
        .iter()
        .filter_map(|&a| grid_pos[a])
        .chain(block_pos.iter().copied())
        .collect();
    Ok((x, perm, used))
}

/// How many times its array's size the gathered blocks of an input may take.
const GATHER_LIMIT: usize = 4;

/// An input whose index map is no fixed re-layout (it reads scalar-prefetch data, or gives
/// element offsets, say): the map evaluated for all grid steps at once, then each step's
/// block gathered from the array `x` at `block index * block` (the element offset itself
/// along element dims), where `gather` clamps as the grid loop's `dynamic_slice`
/// does. Returns `axes ++ block` and `axes`, the grid axes the block indices depend on.
fn gathered_blocks(
    f: &mut FuncBuilder,
    plan: &Plan,
    o: &Operand,
    x: &Value,
    prefetch: &[Value],
) -> Result<(Value, Vec<usize>), EmitError> {
    if o.whole() {
        return Ok((x.clone(), Vec::new()));
    }
    let grid = &plan.grid;
    let map = discharge(o.index_map)?;
    let mut eval = BodyEmitter::batched(&map, grid.clone(), (0..grid.len()).collect(), &[]);
    let (ids, refs) = o.index_map.params().split_at(grid.len());
    for (a, &p) in ids.iter().enumerate() {
        let steps = f.iota(TensorType::new([grid[a]], DType::I32), 0)?;
        eval.set_ref(p, steps, vec![a]);
    }
    for (&p, x) in refs.iter().zip(prefetch) {
        eval.set_ref(p, x.clone(), Vec::new());
    }
    eval.emit_body(f)?;
    let results = o.index_map.results();
    let mut axes = std::collections::BTreeSet::new();
    for &r in results {
        axes.extend(eval.axes_of(r)?);
    }
    let axes: Vec<usize> = axes.into_iter().collect();
    let lead: Vec<usize> = axes.iter().map(|&a| grid[a]).collect();
    // Every step gets its own copy of its block: where steps share blocks a lot, the grid
    // loop's one block at a time is the better program.
    let copies = lead
        .iter()
        .chain(&o.block)
        .try_fold(1usize, |n, &d| n.checked_mul(d));
    let array = o.array.iter().product::<usize>();
    if copies.is_none_or(|c| c > GATHER_LIMIT.saturating_mul(array)) {
        let copies = copies.map_or("more than usize".into(), |c| c.to_string());
        return Err(EmitError::NotBatchable {
            kernel: plan.name.to_string(),
            reason: format!(
                "input `{}`: gathering every step's block takes {copies} elements, over {GATHER_LIMIT}x its array's {array}",
                o.name
            ),
        });
    }
    let mut starts = Vec::with_capacity(results.len());
    for (d, &r) in results.iter().enumerate() {
        let index = eval.value_over(f, r, &axes)?;
        starts.push(o.start(f, d, &index, Some(&lead))?);
    }
    Ok((gather_windows(f, x, &starts, &lead, &o.block)?, axes))
}

/// `layout axes ++ block` -> `array`: the inverse of [`to_blocks`] for outputs (whose
/// constant-index dims are whole; axes of `layout` the map ignores have extent 1).
fn from_blocks(
    f: &mut FuncBuilder,
    o: &Operand,
    maps: &[DimMap],
    blocks: &Value,
    layout: &[usize],
) -> Result<Value, EmitError> {
    let nb = layout.len();
    let mut order = Vec::new();
    for (j, m) in maps.iter().enumerate() {
        if let DimMap::Axis(a) = m {
            order.extend(layout.iter().position(|x| x == a));
        }
        order.push(nb + j);
    }
    order.extend((0..nb).filter(|d| !order.contains(d)).collect::<Vec<_>>());
    // Result dim i of a transpose is operand dim order[i]: the (grid, block) pairs in array
    // order, then the extent-1 leftovers, which the reshape drops.
    let t = f.transpose(blocks, &order)?;
    Ok(f.reshape(&t, &o.array)?)
}
