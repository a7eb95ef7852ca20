//! Kernel -> StableHLO: one `func.func public @main(inputs...) -> (outputs...)` per launch.
//!
//! Forms, same results up to f32 rounding order:
//! - [`Form::GridLoop`] (`grid_loop.rs`): always legal; the grid is a `while` loop over
//!   steps in the TPU's order, blocks sliced in and out, scratch and outputs carried.
//! - [`Form::Batched`] (`batched.rs`): every step of the parallel axes at once (`vmap` over
//!   the grid), looping only over the `arbitrary` axes, if any. Legal when index maps are
//!   grid indices or constants and the body needs no per-step control flow along parallel
//!   axes (the rules are in `batched.rs`). For all-parallel grids whose body cannot tell
//!   steps apart (elementwise ops, reductions within blocks, ...: `folded.rs`) the body runs
//!   once on the whole arrays, as one would write it by hand; otherwise operands are
//!   re-laid out with one leading dim per grid axis.
//! - The accumulator pattern (`accumulate.rs`): a matmul-like body that zeroes a scratch on
//!   the first step of its last, `arbitrary` axis, adds `dot(x, y)` blocks to it every step
//!   and writes it out on the last is one whole-array `dot_general`.
//! - The carried scan (`carried.rs`): a body that zeroes a scratch `carry` on the first step
//!   of its last, `arbitrary` axis, writes `cumsum(x block) + carry` and adds the block's
//!   total to `carry` every step is one whole-array cumsum.
//!
//! Every form reads the body with its refs discharged (`ir::discharge`): ref contents are SSA
//! values there, so no translator keeps ref state of its own. Each traced op kind is translated
//! once (`translate.rs`) for every layout of the grid steps: leading grid dims (`body.rs`) or
//! folded into the IR dims (`folded.rs`). `snapshot.rs` lets a change to any of them be
//! compared byte for byte with the tree before it.
//!
//! [`Form::Auto`] picks the accumulator contraction or the carried scan where its pattern
//! holds; for other grids with `arbitrary` axes the batched form where its body has a `dot`
//! (`batching_pays`), else the grid loop; for all-parallel grids the batched form where it is
//! legal, else the grid loop. It batches only where scratch provably stays private to each
//! parallel point (`private_scratch.rs`), so that it gives the grid loop's (the TPU's,
//! the interpreter's) result even for a kernel that breaks the promise `parallel` makes.
//!
//! [`emit_kernel_checked`] emits the checked mode (`checks.rs`): traced starts are checked
//! instead of clamped. A body with traced starts skips the accumulator contraction and the
//! folded layout (neither translates one: they would not apply anyway).

mod accumulate;
mod batched;
mod body;
mod carried;
mod checks;
mod desugar;
mod error;
mod folded;
mod grid_loop;
mod padded;
mod plan;
mod private_scratch;
mod snapshot;
mod translate;

pub use checks::{Access, BoundsCheck};
pub use error::EmitError;

use crate::ir::{BlockOperand, KernelProgram, OpKind};
use crate::stablehlo::Module;
use plan::{Operand, Plan, Scratch};

/// Which StableHLO form to emit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Form {
    /// The accumulator contraction or carried scan where the pattern holds, the batched form
    /// where it is legal (and, with `arbitrary` axes, pays and keeps scratch private), else
    /// the grid loop.
    #[default]
    Auto,
    GridLoop,
    /// Errors with [`EmitError::NotBatchable`] where it is not legal.
    Batched,
}

/// The module text of `program` in the best legal form.
pub fn emit_kernel(program: &KernelProgram) -> Result<String, EmitError> {
    emit_kernel_as(program, Form::Auto)
}

/// The module text of `program` in `form`.
pub fn emit_kernel_as(program: &KernelProgram, form: Form) -> Result<String, EmitError> {
    snapshot::write(program);
    Ok(emit(program, form, false)?.text)
}

/// A module in checked mode: after the kernel's outputs it returns `2 + grid_rank` `i32`
/// scalars, the id of the first bounds check that failed (0: none; id `k` is
/// `checks[k - 1]`), the start that failed it, and the program ids of the grid step it
/// failed at (`checks.rs`). With no traced start to check, `checks` is empty and `text` is
/// [`emit_kernel_as`]'s, byte for byte, with no extra results.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckedModule {
    pub text: String,
    pub checks: Vec<BoundsCheck>,
    /// Axes of the launch's grid: how many program ids the check state names.
    pub grid_rank: usize,
}

impl CheckedModule {
    /// The number of values the module returns after the kernel's outputs.
    pub fn state_len(&self) -> usize {
        match self.checks.is_empty() {
            true => 0,
            false => checks::state_len(self.grid_rank),
        }
    }
}

/// The module of `program` in `form`, in checked mode.
pub fn emit_kernel_checked(
    program: &KernelProgram,
    form: Form,
) -> Result<CheckedModule, EmitError> {
    snapshot::write(program);
    emit(program, form, true)
}

fn emit(program: &KernelProgram, form: Form, checked: bool) -> Result<CheckedModule, EmitError> {
    if let Some(inner) = program.padded_form() {
        let module = emit(&inner, form, checked)?;
        let text = padded::emit(program, &module.text, &inner, module.state_len())?;
        return Ok(CheckedModule { text, ..module });
    }
    let program = desugar::for_stablehlo(program);
    let plan = plan_of(&program)?;
    plan.check()?;
    let checked = checked && checks::needs_checks(&plan);
    // The contraction only takes index maps that are in-bounds re-layouts (`batched::dim_maps`),
    // and the batched form also maps checked at trace time (it refuses the others when
    // `checked`): only the body's traced starts are theirs to check.
    let body_checked = checked && checks::has_dynamic_starts(&plan.body.body);
    let (module, checks) = match form {
        Form::GridLoop => grid_loop::emit(&plan, checked)?,
        Form::Batched => batched::emit(&plan, body_checked, checked)?,
        Form::Auto if plan.parallel.contains(&false) => {
            let contraction = match body_checked {
                true => None,
                false => match accumulate::emit(&plan)? {
                    None => carried::emit(&plan)?,
                    some => some,
                },
            };
            match contraction {
                Some(module) => (module, Vec::new()),
                None if batching_pays(&plan)? => batched_else_loop(&plan, body_checked, checked)?,
                None => grid_loop::emit(&plan, checked)?,
            }
        }
        // A step that reads scratch another step left behind needs the grid loop's order.
        Form::Auto if !scratch_is_private(&plan)? => grid_loop::emit(&plan, checked)?,
        Form::Auto => batched_else_loop(&plan, body_checked, checked)?,
    };
    Ok(CheckedModule {
        text: module.into_text(),
        checks,
        grid_rank: plan.grid.len(),
    })
}

/// The batched form, or the grid loop where it is not legal (which is only fully known once
/// its body is translated).
fn batched_else_loop(
    plan: &Plan,
    body_checked: bool,
    checked: bool,
) -> Result<(Module, Vec<BoundsCheck>), EmitError> {
    match batched::emit(plan, body_checked, checked) {
        Err(EmitError::NotBatchable { .. }) => grid_loop::emit(plan, checked),
        other => other,
    }
}

/// Whether [`Form::Auto`] tries the batched form for a grid with `arbitrary` axes: when its
/// body has a `dot` (the grid loop's per-step dots are small matmuls, which the batched form
/// makes one large one per sequential step: the grouped matmul of the kernels bench went from
/// 0.23x to 0.72x of hand-written StableHLO; without a dot the re-layout costs more than the
/// loop's steps: the carried row cumsum measured 0.81x looped, 0.60x batched), more than
/// one parallel grid point, and scratch that stays private to each parallel point
/// (`private_scratch.rs`), so that the result is the grid loop's.
fn batching_pays(plan: &Plan) -> Result<bool, EmitError> {
    let points: usize = (0..plan.grid.len())
        .filter(|&a| plan.parallel[a])
        .map(|a| plan.grid[a])
        .product();
    Ok(points > 1 && has_dot(&plan.body.body) && scratch_is_private(plan)?)
}

fn scratch_is_private(plan: &Plan) -> Result<bool, EmitError> {
    if plan.scratch.is_empty() {
        return Ok(true);
    }
    let body = crate::ir::discharge::discharge(plan.body)?;
    Ok(private_scratch::scratch_is_private(plan, &body))
}

fn has_dot(r: &crate::ir::Region) -> bool {
    any_op(r, &|k| matches!(k, OpKind::Dot { .. }))
}

/// `Ok` when [`Form::Batched`] is legal for `program`, else the reason it is not (or the
/// error that stops both forms).
pub fn batched_form_applies(program: &KernelProgram) -> Result<(), String> {
    if let Some(inner) = program.padded_form() {
        return batched_form_applies(&inner);
    }
    let program = desugar::for_stablehlo(program);
    let plan = plan_of(&program).map_err(|e| e.to_string())?;
    plan.check().map_err(|e| e.to_string())?;
    match batched::emit(&plan, false, false) {
        Ok(_) => Ok(()),
        Err(EmitError::NotBatchable { reason, .. }) => Err(reason),
        Err(e) => Err(e.to_string()),
    }
}

/// Body params are the refs of the prefetch arrays, the inputs, the outputs, then the
/// scratch buffers.
fn plan_of(p: &KernelProgram) -> Result<Plan<'_>, EmitError> {
    let params = p.body.params();
    let np = p.prefetch.len();
    let expected = np + p.inputs.len() + p.outputs.len() + p.scratch.len();
    if params.len() != expected {
        return Err(EmitError::Launch {
            kernel: p.name.clone(),
            message: format!(
                "the body takes {} refs, the launch has {expected} operands and scratch buffers",
                params.len()
            ),
        });
    }
    let operand = |k: usize, o| operand(params[np + k], o);
    let n_in = p.inputs.len();
    let n_io = np + n_in + p.outputs.len();
    Ok(Plan {
        name: &p.name,
        body: &p.body,
        grid: p.grid.clone(),
        prefetch: p
            .prefetch
            .iter()
            .enumerate()
            .map(|(k, a)| Scratch {
                param: params[k],
                shape: a.shape.clone(),
                dtype: a.dtype,
            })
            .collect(),
        inputs: p
            .inputs
            .iter()
            .enumerate()
            .map(|(k, o)| operand(k, o))
            .collect(),
        outputs: p
            .outputs
            .iter()
            .enumerate()
            .map(|(k, o)| operand(n_in + k, o))
            .collect(),
        scratch: p
            .scratch
            .iter()
            .enumerate()
            .map(|(k, s)| Scratch {
                param: params[n_io + k],
                shape: s.shape.clone(),
                dtype: s.dtype,
            })
            .collect(),
        aliases: p.aliases.clone(),
        parallel: p.semantics.iter().map(|s| s.is_parallel()).collect(),
        manual_dma: p
            .inputs
            .iter()
            .chain(&p.outputs)
            .any(|o| o.space == crate::ir::MemorySpace::Any)
            || has_dma(&p.body.body),
    })
}

fn has_dma(r: &crate::ir::Region) -> bool {
    any_op(r, &|k| {
        matches!(
            k,
            OpKind::DmaStart(_) | OpKind::DmaWait(_) | OpKind::RunScoped { .. }
        )
    })
}

/// Whether an op of `r`, or of a region nested in it, is one `pick` picks.
fn any_op(r: &crate::ir::Region, pick: &dyn Fn(&OpKind) -> bool) -> bool {
    r.ops
        .iter()
        .any(|op| pick(&op.kind) || op.kind.regions().into_iter().any(|r| any_op(r, pick)))
}

fn operand(param: crate::ir::ValueId, o: &BlockOperand) -> Operand<'_> {
    Operand {
        name: &o.name,
        param,
        array: o.array_shape.clone(),
        dtype: o.dtype,
        block: o.block_shape.clone(),
        view: o.ref_shape(),
        index_map: &o.index_map,
        element: &o.element,
    }
}
