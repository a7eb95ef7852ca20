//! Programs of other origins (a `#[tpu_kernel]` kernel's StableHLO module, registered as a
//! torch op) as ops of the eager runtime: their inputs stay on the device and their results
//! are eager tensors, so a kernel op between ATen ops never goes through the host. In Strict
//! and Debug the program launches on its own; in DeferAndFuse and inside a [`crate::compile`]
//! trace it is recorded like an ATen op and called from the fused program as a private
//! function, so a kernel op fuses with the ops around it and a compiled function replays it.

use crate::cache::OpEntry;
use crate::error::{EagerError, Result};
use crate::mode::mode;
use crate::runtime::with;
use crate::stats::count;
use crate::tensor::Tensor;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};
use tessera_lowering::stablehlo::TensorType;
use tessera_runtime::Signature;

/// A module made outside the op library, ready to be called on eager tensors. Build it once
/// per program (a kernel and its input signature) and call it many times: a deferred loop
/// calling the same `ProgramOp` compiles once.
#[derive(Clone)]
pub struct ProgramOp {
    name: &'static str,
    entry: Arc<OpEntry>,
    inputs: Vec<TensorType>,
}

impl ProgramOp {
    /// `module`: a plain `module { func.func public @main(...) ... }` taking and returning
    /// ranked tensors; `name` names it in errors (`kernel \`softmax\``). The argument and
    /// result types are read from `@main`'s signature (nothing is compiled yet).
    pub fn new(name: &str, module: String) -> Result<ProgramOp> {
        let bad = |why: &str| EagerError::Usage(format!("{name}: {why}"));
        let body = module.trim();
        if !(body.starts_with("module {") && body.ends_with('}')) {
            return Err(bad("the program must be a plain `module { ... }`"));
        }
        if !body.contains("func.func public @main(") {
            return Err(bad("the program has no `func.func public @main`"));
        }
        let sig = Signature::of_main(&module).ok_or_else(|| {
            bad("the signature of the program's @main is not read as ranked tensors")
        })?;
        let ty = |t: &tessera_runtime::TensorType| TensorType::new(t.shape.clone(), t.dtype);
        let results = sig.outputs.iter().map(ty).collect();
        let name = intern(name);
        Ok(ProgramOp {
            name,
            entry: Arc::new(OpEntry::program(name, module, results)),
            inputs: sig.inputs.iter().map(ty).collect(),
        })
    }

    /// Its name, as given.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The types of the program's results.
    pub fn outputs(&self) -> &[TensorType] {
        &self.entry.results
    }

    /// The types the program takes.
    pub fn inputs(&self) -> &[TensorType] {
        &self.inputs
    }

    /// Calls the program on `inputs` in the current mode (Strict: launched without waiting;
    /// Debug: waiting, so a device error is raised here naming the program and its argument
    /// types; DeferAndFuse and Compiled: recorded). An input of another type than the
    /// program takes is an error here.
    pub fn call(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let name = self.name;
        if inputs.len() != self.inputs.len() {
            return Err(EagerError::Usage(format!(
                "{name}: takes {} input(s), {} given",
                self.inputs.len(),
                inputs.len()
            )));
        }
        for (i, (t, want)) in inputs.iter().zip(&self.inputs).enumerate() {
            let got = t.ty();
            if got != *want {
                return Err(EagerError::Usage(format!(
                    "{name}: input {i} is {}{:?}, the program takes {}{:?}",
                    got.dtype, got.shape, want.dtype, want.shape
                )));
            }
        }
        let m = mode();
        count(m, |s| s.ops += 1);
        with(|rt| {
            let vals = rt.inputs_of(inputs.iter().map(Ok), m)?;
            let arguments = || {
                let tys: Vec<String> = inputs
                    .iter()
                    .map(|t| format!("{}{:?}", t.dtype(), t.shape()))
                    .collect();
                tys.join(", ")
            };
            let results = rt.run_entry(&self.entry, vals, m, &arguments)?;
            let outs = results
                .into_iter()
                .zip(&self.entry.results)
                .map(|(v, ty)| rt.wrap(ty.clone(), v, self.entry.op()))
                .collect();
            rt.after_op(&self.entry, m)?;
            Ok(outs)
        })
    }
}

impl std::fmt::Debug for ProgramOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramOp")
            .field("name", &self.name)
            .field("inputs", &self.inputs)
            .field("outputs", &self.entry.results)
            .finish()
    }
}

/// `name` as a `&'static str`, leaked once per distinct name (a program's name is kept by the
/// values it made, for their errors; there are as many names as registered kernel ops).
fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(n) = names.get(name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(n);
    n
}
