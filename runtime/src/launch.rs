//! Running a kernel launch on a device: trace the launch into a `KernelProgram`, lower it for
//! the device's target (`tessera_lowering::backend`), then either interpret it (`interp`
//! device) or run the module through PJRT (cached), with traced slice starts checked where
//! `checked_slices` says (see `checked_slices.rs`).

use crate::checked_slices::{checked_slices, strip_and_report};
use crate::compile_options::CompileOptions;
use crate::device::Device;
use crate::error::Result;
use std::sync::Arc;
use tessera_lowering::backend::{self, Backend, Lowered};
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::{KernelProgram, Launch};
use tessera_lowering::{interp, DType, HostTensor};

/// `Launch::run`: the last step of a launch spec.
pub trait LaunchExt {
    /// Traces the kernel for these inputs and runs it on `device`; returns the outputs.
    /// Errors carry the user's source location (of this call, or of the spec's pieces).
    fn run(&self, device: &Device, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>>;

    /// As `run`, choosing the StableHLO form (ignored on the interpreter).
    fn run_as(
        &self,
        device: &Device,
        inputs: &[&HostTensor],
        form: Form,
    ) -> Result<Vec<HostTensor>>;

    /// As `run_as`, choosing whether traced slice starts are checked (`true`: an error at the
    /// user's line) or clamped into bounds as StableHLO's `dynamic_slice` does (`false`),
    /// whatever `TESSERA_CHECKED_SLICES` and the build say.
    fn run_checked(
        &self,
        device: &Device,
        inputs: &[&HostTensor],
        form: Form,
        checked: bool,
    ) -> Result<Vec<HostTensor>>;
}

impl LaunchExt for Launch {
    #[track_caller]
    fn run(&self, device: &Device, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>> {
        self.run_as(device, inputs, Form::Auto)
    }

    #[track_caller]
    fn run_as(
        &self,
        device: &Device,
        inputs: &[&HostTensor],
        form: Form,
    ) -> Result<Vec<HostTensor>> {
        let program = self.trace_program(&signature(inputs))?;
        run_program(&program, device, inputs, form)
    }

    #[track_caller]
    fn run_checked(
        &self,
        device: &Device,
        inputs: &[&HostTensor],
        form: Form,
        checked: bool,
    ) -> Result<Vec<HostTensor>> {
        let program = self.trace_program(&signature(inputs))?;
        run_program_checked(&program, device, inputs, form, checked)
    }
}

fn signature(inputs: &[&HostTensor]) -> Vec<(DType, Vec<usize>)> {
    inputs
        .iter()
        .map(|t| (t.dtype(), t.shape().to_vec()))
        .collect()
}

/// Runs an already traced program on `device`, checking traced slice starts where
/// [`checked_slices`](crate::checked_slices) says.
pub fn run_program(
    program: &KernelProgram,
    device: &Device,
    inputs: &[&HostTensor],
    form: Form,
) -> Result<Vec<HostTensor>> {
    run_program_checked(program, device, inputs, form, checked_slices()?)
}

/// As [`run_program`], checking traced slice starts or not as `checked` says.
pub fn run_program_checked(
    program: &KernelProgram,
    device: &Device,
    inputs: &[&HostTensor],
    form: Form,
    checked: bool,
) -> Result<Vec<HostTensor>> {
    let backend = Backend::for_target(device.target()?, form, checked);
    let lowered = backend::lower(program, backend)?;
    let Some(text) = lowered.module() else {
        let owned: Vec<HostTensor> = inputs.iter().map(|t| (*t).clone()).collect();
        return Ok(interp::run(program, &owned)?);
    };
    let client = device.client()?;
    let exe = client.compile_cached(text, &CompileOptions::default())?;
    let bufs = inputs
        .iter()
        .map(|t| client.upload(t))
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<_> = bufs.iter().collect();
    let outs = match &lowered {
        Lowered::StableHlo(module) => strip_and_report(exe.execute(&refs)?, module)?,
        _ => exe.execute(&refs)?,
    };
    outs.iter().map(|b| b.to_host()).collect()
}

/// Lowers `program` for `device` (StableHLO in `form`, or Mosaic on a TPU; unchecked: its
/// outputs are the kernel's) and compiles it through the device's cache. An error on the
/// interpreter, which compiles nothing.
pub fn compile_program(
    program: &KernelProgram,
    device: &Device,
    form: Form,
) -> Result<Arc<crate::Executable>> {
    let text = program_module(program, device, form)?;
    device
        .client()?
        .compile_cached(&text, &CompileOptions::default())
}

/// The module [`compile_program`] compiles: `program` lowered for `device`, unchecked (the
/// eager runtime calls it from its fused programs: a kernel op).
pub fn program_module(program: &KernelProgram, device: &Device, form: Form) -> Result<String> {
    let backend = Backend::for_target(device.target()?, form, false);
    Ok(backend::lower(program, backend)?.into_module()?)
}
