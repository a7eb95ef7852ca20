//! The general form: the grid as one `stablehlo.while` over a linearized step counter, in
//! lexicographic order with the last axis fastest (the TPU's order). Each step reads its
//! blocks with `dynamic_slice` at `index_map(grid index) * block`, runs the body, and writes
//! output blocks back with `dynamic_update_slice`. Outputs (zero-initialized) and scratch are
//! loop-carried, so scratch persists across steps and a revisited output block (the
//! accumulator pattern) sees what the previous step wrote. In checked mode (`checks.rs`) the
//! bounds-check state is carried last.

use super::batched::with_block;
use super::body::BodyEmitter;
use super::checks::{block_needs_check, Access, BoundsCheck, Checker};
use super::error::EmitError;
use super::plan::{Operand, Plan};
use crate::dtype::DType;
use crate::ir::discharge::{discharge, Discharged};
use crate::stablehlo::{FuncBuilder, Module, TensorType, Value};

/// The module, and its bounds checks when `checked` (then it returns their state last).
pub(super) fn emit(plan: &Plan, checked: bool) -> Result<(Module, Vec<BoundsCheck>), EmitError> {
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
    let body = discharge(plan.body)?;
    let maps = plan
        .inputs
        .iter()
        .chain(&plan.outputs)
        .map(|o| discharge(o.index_map))
        .collect::<Result<Vec<_>, _>>()?;
    let step = Step {
        plan,
        body: &body,
        maps: &maps,
        prefetch: &prefetch,
        args: &args,
    };
    let mut init = Vec::new();
    for (j, o) in plan.outputs.iter().enumerate() {
        // An aliased output starts as its input (one buffer on a TPU).
        init.push(match plan.aliases.iter().find(|a| a.1 == j) {
            Some(&(i, _)) => args[i].clone(),
            None => f.zeros(TensorType::new(o.array.clone(), o.dtype))?,
        });
    }
    for s in &plan.scratch {
        init.push(f.zeros(TensorType::new(s.shape.clone(), s.dtype))?);
    }
    let mut checks = checked
        .then(|| Checker::new(&mut f, plan.grid.len()))
        .transpose()?;
    init.extend(checks.as_ref().map(Checker::state).unwrap_or_default());
    let steps: usize = plan.grid.iter().product();
    let lo = f.scalar(DType::I32, 0.0)?;
    let hi = f.scalar(DType::I32, steps as f64)?;
    let init_refs: Vec<&Value> = init.iter().collect();
    let carried = f.fori_loop(&lo, &hi, &init_refs, |f, s, carried| {
        step.body(f, s, carried, &mut checks)
    })?;
    let mut outs: Vec<&Value> = carried[..plan.outputs.len()].iter().collect();
    let table = match checks {
        Some(c) => {
            outs.extend(&carried[carried.len() - c.state_len()..]);
            c.table
        }
        None => Vec::new(),
    };
    Ok((f.finish(&outs)?, table))
}

/// What every grid step reads: the plan and the module's arguments.
struct Step<'p, 'a> {
    plan: &'p Plan<'a>,
    body: &'p Discharged<'a>,
    /// The inputs' index maps, then the outputs'.
    maps: &'p [Discharged<'a>],
    /// The scalar-prefetch arrays (whole; the body and the index maps read them).
    prefetch: &'p [Value],
    args: &'p [Value],
}

impl Step<'_, '_> {
    /// One grid step: returns the next outputs and scratch contents (and check state).
    fn body(
        &self,
        f: &mut FuncBuilder,
        step: &Value,
        carried: &[Value],
        checks: &mut Option<Checker>,
    ) -> Result<Vec<Value>, EmitError> {
        let plan = self.plan;
        let carried = Checker::split_state(checks, carried)?;
        let idx = grid_indices(f, step, &plan.grid)?;
        let mut body = BodyEmitter::step(self.body, plan.grid.clone(), idx.clone());
        for (a, x) in plan.prefetch.iter().zip(self.prefetch) {
            body.set_ref(a.param, x.clone(), Vec::new());
        }
        let (in_maps, out_maps) = self.maps.split_at(plan.inputs.len());
        for ((o, x), map) in plan.inputs.iter().zip(self.args).zip(in_maps) {
            let block = self.read_block(f, o, map, x, &idx, checks)?;
            body.set_ref(o.param, block.0, Vec::new());
        }
        let (outs, scratch) = carried.split_at(plan.outputs.len());
        let mut offsets = Vec::new();
        for ((o, x), map) in plan.outputs.iter().zip(outs).zip(out_maps) {
            let (block, off) = self.read_block(f, o, map, x, &idx, checks)?;
            body.set_ref(o.param, block, Vec::new());
            offsets.push(off);
        }
        for (s, v) in plan.scratch.iter().zip(scratch) {
            body.set_ref(s.param, v.clone(), Vec::new());
        }
        body.set_checks(checks.take());
        body.emit_body(f)?;
        *checks = body.take_checks();
        let mut next = Vec::new();
        for ((o, x), off) in plan.outputs.iter().zip(outs).zip(&offsets) {
            let view = body.ref_contents(f, o.param)?;
            let block = with_block(f, &view, 0, &o.block)?;
            next.push(match off {
                None => block,
                Some(off) => {
                    let refs: Vec<&Value> = off.iter().collect();
                    f.dynamic_update_slice(x, &block, &refs)?
                }
            });
        }
        for s in &plan.scratch {
            next.push(body.ref_contents(f, s.param)?);
        }
        next.extend(checks.as_ref().map(Checker::state).unwrap_or_default());
        Ok(next)
    }

    /// The block of `x` this step sees, and its element offsets (`None` for a whole-array
    /// block). In checked mode, blocks the tracer could not check are checked here.
    fn read_block(
        &self,
        f: &mut FuncBuilder,
        o: &Operand,
        index_map: &Discharged,
        x: &Value,
        idx: &[Value],
        checks: &mut Option<Checker>,
    ) -> Result<(Value, Option<Vec<Value>>), EmitError> {
        // Squeezed dims have size 1: the ref's view is the block reshaped.
        let view = |f: &mut FuncBuilder, block: Value| with_block(f, &block, 0, &o.view);
        let check_blocks = checks.is_some() && block_needs_check(self.plan, o);
        if o.whole() && !check_blocks {
            return Ok((view(f, x.clone())?, None));
        }
        // The step's program ids name the step of a failed check in the map's own reads.
        let mut map = BodyEmitter::step(index_map, self.plan.grid.clone(), idx.to_vec());
        let (grid_params, prefetch_params) = o.index_map.params().split_at(idx.len());
        for (p, i) in grid_params.iter().zip(idx) {
            map.bind(*p, i.clone());
        }
        for (p, x) in prefetch_params.iter().zip(self.prefetch) {
            map.set_ref(*p, x.clone(), Vec::new());
        }
        map.set_checks(checks.take());
        map.emit_body(f)?;
        *checks = map.take_checks();
        let mut offsets = Vec::new();
        for (d, r) in o.index_map.results().iter().enumerate() {
            let index = map.value(*r)?;
            offsets.push(o.start(f, d, &index, None)?);
        }
        if let Some(c) = checks.as_mut().filter(|_| check_blocks) {
            for (dim, start) in offsets.iter().enumerate() {
                let check = BoundsCheck {
                    loc: o.index_map.loc,
                    access: Access::Block {
                        operand: o.name.to_string(),
                        element: o.element.contains(&dim),
                    },
                    dim,
                    size: o.block[dim],
                    shape: o.array.clone(),
                };
                c.check(f, start, idx, check)?;
            }
        }
        if o.whole() {
            return Ok((view(f, x.clone())?, None));
        }
        let refs: Vec<&Value> = offsets.iter().collect();
        let block = f.dynamic_slice(x, &refs, &o.block)?;
        Ok((view(f, block)?, Some(offsets)))
    }
}

/// Grid indices of linear step `s`: `i_a = (s / prod(grid[a+1..])) % grid[a]`.
pub(super) fn grid_indices(
    f: &mut FuncBuilder,
    step: &Value,
    grid: &[usize],
) -> Result<Vec<Value>, EmitError> {
    let mut out = Vec::with_capacity(grid.len());
    let mut stride = 1usize;
    for (a, &g) in grid.iter().enumerate().rev() {
        let mut i = step.clone();
        if stride != 1 {
            let s = f.scalar(DType::I32, stride as f64)?;
            i = f.div(&i, &s)?;
        }
        if a != 0 {
            let n = f.scalar(DType::I32, g as f64)?;
            i = f.binary(crate::stablehlo::BinaryOp::Remainder, &i, &n)?;
        }
        out.push(i);
        stride *= g;
    }
    out.reverse();
    Ok(out)
}
