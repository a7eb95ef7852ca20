//! Compiled mode: a closure over tensors run as one program. Its first call records the
//! closure's ops and compiles them into one fused program; later calls with the same input
//! types record again (a cache hit per op: no lowering, no text, no compile) and launch the
//! cached program once, with the new inputs and the current values of captured tensors
//! (weights updated in place between calls are read, not baked in).

use crate::error::Result;
use crate::mode::{mode, set_mode, EagerMode};
use crate::runtime::with;
use crate::stats::FlushReason;
use crate::tensor::Tensor;

/// A closure compiled by [`compile`].
pub struct CompiledFn<F> {
    f: F,
}

/// Compiles `f` (traced on its first call): `let step = compile(|x| Ok(vec![x[0].relu()?]));`.
pub fn compile<F>(f: F) -> CompiledFn<F>
where
    F: FnMut(&[Tensor]) -> Result<Vec<Tensor>>,
{
    CompiledFn { f }
}

impl<F> CompiledFn<F>
where
    F: FnMut(&[Tensor]) -> Result<Vec<Tensor>>,
{
    /// Runs the program on `inputs`; the results are on the device (reading them is a sync).
    pub fn call(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let previous = mode();
        // What the caller left pending runs first, so the program holds only the closure.
        with(|rt| rt.flush(FlushReason::NeedsValue))?;
        set_mode(EagerMode::Compiled)?;
        let outs = (self.f)(inputs);
        let ran = with(|rt| rt.flush(FlushReason::Compiled));
        // Back to the caller's mode (nothing is pending now).
        set_mode(previous)?;
        let outs = outs?;
        ran?;
        Ok(outs)
    }
}
