//! Shipped kernels registered as overrides of ATen ops: `ops::dispatch` picks one when its
//! predicate holds for the call's arguments, else the op's default lowering runs.
//!
//! The kernel is lowered on its own for the op's device (trace -> StableHLO, or on a TPU
//! Mosaic in a `tpu_custom_call`) and called from the op's module as a private function, so
//! an override composes with other ops like any lowering.

use crate::softmax;
use tessera_lowering::backend::{self, Backend, Target};
use tessera_lowering::stablehlo::Form;
use tessera_lowering::DType;
use tessera_ops::{Args, HostArgs, Lower, LowerError, LowerResult, OpOverride, Out};
use tessera_runtime::DeviceKind;

inventory::submit! {
    OpOverride {
        op: "_softmax",
        kernel: "softmax",
        priority: 10,
        applies: softmax_applies,
        lower: softmax_lower,
    }
}

/// The softmax kernel takes 2-D f32/bf16 arrays, softmax over the last dim, with no dtype
/// change, and shapes its row blocks tile.
fn softmax_applies(a: &HostArgs, _device: DeviceKind) -> bool {
    let (Ok(x), Ok(dim), Ok(half_to_float)) =
        (a.tensor_ref("self"), a.int("dim"), a.bool("half_to_float"))
    else {
        return false;
    };
    let shape = x.shape();
    !half_to_float
        && matches!(x.dtype(), DType::F32 | DType::BF16)
        && shape.len() == 2
        && (dim == 1 || dim == -1)
        && (softmax::SHIPPED.launch)(shape).is_ok()
}

fn softmax_lower(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let launch = (softmax::SHIPPED.launch)(x.shape()).map_err(LowerError::Unsupported)?;
    let program = launch
        .trace_program(&[(x.dtype(), x.shape().to_vec())])
        .map_err(|e| LowerError::Unsupported(e.to_string()))?;
    // Lowered for the op's device (the one place that chooses: `backend::Backend`): a TPU
    // runs the Mosaic kernel in a `tpu_custom_call`, other devices its grid as StableHLO;
    // either way a StableHLO module that the op's module calls. A kernel Mosaic refuses for
    // the generation (a row block over its VMEM budget: `softmax_applies` sees only the
    // device kind) runs as its StableHLO grid, as every TPU call did before.
    let target = cx.kernel_target()?;
    let lower = |t| {
        backend::lower(&program, Backend::for_target(t, Form::Auto, false))
            .and_then(|lowered| lowered.into_module())
    };
    let text = match lower(target) {
        Err(_) if target != Target::StableHlo => lower(Target::StableHlo),
        lowered => lowered,
    }
    .map_err(|e| LowerError::Unsupported(e.to_string()))?;
    let y = cx.call_module(&text, &[&x], vec![x.ty().clone()])?;
    Ok(vec![Out::Tensor(y[0].clone())])
}
