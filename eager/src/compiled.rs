//! Compiled mode: a closure over tensors traced once into one program and replayed. The
//! first call records the closure's ops (as DeferAndFuse does) and compiles them into one
//! program; it notes where each program input comes from (an argument, a tensor the closure
//! captured, or a constant made while tracing) and which tensors that existed before the
//! trace it writes (weights updated in place). Later calls with arguments of the same types
//! run that program directly: no Rust code of the closure runs, so numbers it computes on
//! the host are those of the trace (as with `jax.jit`); pass changing numbers as tensors.

use crate::error::Result;
use crate::mode::{mode, set_mode, EagerMode};
use crate::replay::Replay;
use crate::runtime::with;
use crate::stats::FlushReason;
use crate::tensor::{next_serial, Tensor};

/// A closure compiled by [`compile`].
pub struct CompiledFn<F> {
    f: F,
    replay: Option<Replay>,
}

/// Compiles `f` (traced on its first call): `let step = compile(|x| Ok(vec![x[0].relu()?]));`.
pub fn compile<F>(f: F) -> CompiledFn<F>
where
    F: FnMut(&[Tensor]) -> Result<Vec<Tensor>>,
{
    CompiledFn { f, replay: None }
}

impl<F> CompiledFn<F>
where
    F: FnMut(&[Tensor]) -> Result<Vec<Tensor>>,
{
    /// Runs the program on `inputs`; the results are on the device (reading them is a sync).
    pub fn call(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        // What the caller left pending runs first, so the program holds only the closure.
        with(|rt| rt.flush(FlushReason::NeedsValue))?;
        if let Some(r) = &self.replay {
            let same = r.arg_types.len() == inputs.len()
                && r.arg_types.iter().zip(inputs).all(|(t, x)| *t == x.ty());
            if same {
                if let Some(outs) = with(|rt| r.run(rt, inputs))? {
                    return Ok(outs);
                }
            }
        }
        self.trace(inputs)
    }

    /// Whether the next call with the same argument types replays a program.
    pub fn is_traced(&self) -> bool {
        self.replay.is_some()
    }

    fn trace(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let previous = mode();
        set_mode(EagerMode::Compiled)?;
        let since = next_serial();
        let graph = with(|rt| Ok(rt.graph.id))?;
        let outs = (self.f)(inputs);
        let traced = match &outs {
            // A trace that had to run part of itself early (a host read inside the closure,
            // the size limit) is not one program: each call runs it again.
            Ok(_) if with(|rt| Ok(rt.graph.id))? != graph => {
                with(|rt| rt.flush(FlushReason::Compiled)).map(|_| None)
            }
            Ok(o) => with(|rt| rt.flush_traced(inputs, o, since)),
            Err(_) => with(|rt| rt.flush(FlushReason::Compiled)).map(|_| None),
        };
        // Back to the caller's mode (nothing is pending now).
        set_mode(previous)?;
        let outs = outs?;
        self.replay = traced?;
        Ok(outs)
    }
}
