//! Compiled programs of other origins (a `#[tpu_kernel]` kernel's executable, registered as a
//! torch op) run on eager tensors: their inputs stay on the device and their results are new
//! eager tensors, so a kernel op between ATen ops on the device never goes through the host.

use crate::error::{EagerError, Result};
use crate::mode::{mode, EagerMode};
use crate::runtime::{with, Val};
use crate::stats::{count, FlushReason};
use crate::tensor::{State, Tensor};
use std::sync::Arc;
use std::time::Instant;
use tessera_lowering::stablehlo::TensorType;
use tessera_runtime::{Buffer, Executable};

/// Runs `exe` (compiled on the eager device's client) on `inputs`, whose results have the
/// types `outputs`; `name` names it in errors (`kernel \`softmax\``). Pending inputs are
/// computed first (a deferred graph holding them is flushed: a sync point for them); the
/// program launches as the mode says (Strict: without waiting; Debug: waiting, so its error
/// is raised here). Not inside a [`crate::compile`] trace, whose replay would skip it.
pub fn run_program(
    exe: &Executable,
    inputs: &[Tensor],
    outputs: &[TensorType],
    name: &str,
) -> Result<Vec<Tensor>> {
    let m = mode();
    if m == EagerMode::Compiled {
        return Err(EagerError::Usage(format!(
            "{name}: a compiled program cannot run inside a tessera_eager::compile trace"
        )));
    }
    with(|rt| {
        let mut bufs: Vec<Arc<Buffer>> = Vec::with_capacity(inputs.len());
        for t in inputs {
            match rt.value_of(t, Some(FlushReason::NeedsValue))?.1 {
                Val::Buf(b) => bufs.push(b),
                Val::Pending(_) => {
                    return Err(EagerError::Usage(
                        "internal: a program input stayed pending".into(),
                    ))
                }
            }
        }
        let refs: Vec<&Buffer> = bufs.iter().map(|b| &**b).collect();
        let args = || {
            let tys: Vec<String> = inputs
                .iter()
                .map(|t| format!("{}{:?}", t.dtype(), t.shape()))
                .collect();
            tys.join(", ")
        };
        let failed = |e: &tessera_runtime::RuntimeError| EagerError::Program {
            name: name.to_string(),
            args: args(),
            message: e.to_string(),
        };
        let start = Instant::now();
        let outs = exe.execute(&refs).map_err(|e| failed(&e))?;
        let nanos = start.elapsed().as_nanos() as u64;
        count(m, |s| {
            s.launches += 1;
            s.execute_nanos += nanos;
        });
        if outs.len() != outputs.len() {
            return Err(EagerError::Usage(format!(
                "{name}: the program returned {} result(s), {} expected",
                outs.len(),
                outputs.len()
            )));
        }
        let mut results = Vec::with_capacity(outs.len());
        for (b, ty) in outs.into_iter().zip(outputs) {
            if m == EagerMode::Debug {
                b.block_until_ready().map_err(|e| failed(&e))?;
            }
            if b.shape() != ty.shape.as_slice() || b.dtype() != ty.dtype {
                return Err(EagerError::Usage(format!(
                    "{name}: the program returned {}{:?} where {}{:?} was expected",
                    b.dtype(),
                    b.shape(),
                    ty.dtype,
                    ty.shape
                )));
            }
            let state = State::Ready {
                buf: Arc::new(b),
                op: None,
            };
            results.push(Tensor::from_state(ty.clone(), state, rt.kind));
        }
        Ok(results)
    })
}
