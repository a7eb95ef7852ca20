//! Compiled programs: compile StableHLO text, execute with device buffers.

use crate::buffer::Buffer;
use crate::client::ClientInner;
use crate::compile_options::{CompileOptions, OptionOverride};
use crate::error::{Result, RuntimeError};
use crate::ffi;
use crate::pjrt_call::pjrt;
use crate::signature::{Signature, TensorType};
use smallvec::SmallVec;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A program loaded on a client's device.
pub struct Executable {
    client: Arc<ClientInner>,
    raw: *mut ffi::PJRT_LoadedExecutable,
    name: String,
    num_outputs: usize,
    signature: Option<Signature>,
    /// Whether the module may alias an output to an input (donation): only then does a launch
    /// name the inputs it keeps (PJRT builds a set of them per launch).
    may_alias: bool,
    /// Whether `@main`'s result types are the types PJRT gave the first launch's outputs:
    /// later launches then take them from the signature instead of asking PJRT twice per
    /// output (~5% of a tiny op's launch).
    typed_outputs: OnceLock<bool>,
    compile_time: Duration,
}

// SAFETY: PJRT loaded executables may be executed concurrently from several threads.
unsafe impl Send for Executable {}
unsafe impl Sync for Executable {}

impl std::fmt::Debug for Executable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Executable({}, {} output(s))",
            self.name, self.num_outputs
        )
    }
}

impl Executable {
    pub(crate) fn compile(
        client: &Arc<ClientInner>,
        module: &str,
        options: &CompileOptions,
    ) -> Result<Executable> {
        client.check_process()?;
        crate::mlir_check::check_before_parse(module)?;
        let api = client.plugin.api();
        let start = Instant::now();
        let program = ffi::mlir_program(module);
        let opts = platform_options(&client.platform_name, options).to_proto_bytes();
        let mut a: ffi::PJRT_Client_Compile_Args = ffi::args();
        a.client = client.raw;
        a.program = &program;
        a.compile_options = opts.as_ptr() as *const _;
        a.compile_options_size = opts.len();
        pjrt!(api, PJRT_Client_Compile, &mut a)?;
        let mut exe = Executable {
            client: client.clone(),
            raw: a.executable,
            name: main_name(module),
            num_outputs: 0,
            signature: Signature::of_main(module),
            may_alias: may_alias(module),
            typed_outputs: OnceLock::new(),
            compile_time: Duration::ZERO,
        };
        exe.num_outputs = exe.query_num_outputs()?;
        exe.compile_time = start.elapsed();
        Ok(exe)
    }

    fn query_num_outputs(&self) -> Result<usize> {
        let api = self.client.plugin.api();
        let mut ge: ffi::PJRT_LoadedExecutable_GetExecutable_Args = ffi::args();
        ge.loaded_executable = self.raw;
        pjrt!(api, PJRT_LoadedExecutable_GetExecutable, &mut ge)?;
        let mut no: ffi::PJRT_Executable_NumOutputs_Args = ffi::args();
        no.executable = ge.executable;
        let counted = pjrt!(api, PJRT_Executable_NumOutputs, &mut no);
        let mut d: ffi::PJRT_Executable_Destroy_Args = ffi::args();
        d.executable = ge.executable;
        pjrt!(api, PJRT_Executable_Destroy, &mut d)?;
        counted.map(|_| no.num_outputs)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }
    /// The `@main` signature read from the module text, when it has only ranked tensors.
    pub fn signature(&self) -> Option<&Signature> {
        self.signature.as_ref()
    }
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }
    /// The platform the executable runs on.
    pub fn platform_name(&self) -> &str {
        &self.client.platform_name
    }

    /// Checks inputs against `@main`'s signature before PJRT sees them.
    fn check_inputs(&self, inputs: &[&Buffer]) -> Result<()> {
        let Some(sig) = &self.signature else {
            return Ok(());
        };
        if sig.inputs.len() != inputs.len() {
            return Err(RuntimeError::InputCount {
                name: self.name.clone(),
                expected: sig.inputs.len(),
                got: inputs.len(),
            });
        }
        for (index, (want, got)) in sig.inputs.iter().zip(inputs).enumerate() {
            // Compared in place; the type is built only for the error.
            if !is_type_of(want, got) {
                let got_ty = TensorType {
                    shape: got.shape().to_vec(),
                    dtype: got.dtype(),
                };
                return Err(RuntimeError::InputMismatch {
                    name: self.name.clone(),
                    index,
                    expected: want.to_string(),
                    got: got_ty.to_string(),
                });
            }
            if !Arc::ptr_eq(got.client_inner(), &self.client) {
                return Err(RuntimeError::InputMismatch {
                    name: self.name.clone(),
                    index,
                    expected: "a buffer of this executable's client".into(),
                    got: "a buffer of another client".into(),
                });
            }
        }
        Ok(())
    }

    /// On the CPU plugin outputs live in host memory: outputs the host cannot hold are refused
    /// before the plugin tries (and fails in ways that may abort). Probed only from 1 GiB of
    /// outputs (a reserve and free, never touched), so small launches pay nothing.
    fn check_output_memory(&self) -> Result<()> {
        const PROBE_FROM: usize = 1 << 30;
        let Some(sig) = &self.signature else {
            return Ok(());
        };
        if self.client.platform_name != "cpu" {
            return Ok(());
        }
        let mut total = 0usize;
        for t in &sig.outputs {
            total = tessera_lowering::host::byte_len(t.dtype, &t.shape)
                .ok()
                .and_then(|b| b.checked_add(total))
                .ok_or_else(|| RuntimeError::OutputsTooLarge {
                    name: self.name.clone(),
                    bytes: "more than 2^64".into(),
                })?;
        }
        if total >= PROBE_FROM && Vec::<u8>::new().try_reserve_exact(total).is_err() {
            return Err(RuntimeError::OutputsTooLarge {
                name: self.name.clone(),
                bytes: total.to_string(),
            });
        }
        Ok(())
    }

    /// Launches the program. Returns at once with the output buffers; their values become
    /// ready asynchronously (`Buffer::to_host` and `block_until_ready` wait). Inputs stay
    /// valid and can be passed again (none is donated, even to a module that aliases one).
    pub fn execute(&self, inputs: &[&Buffer]) -> Result<Vec<Buffer>> {
        self.execute_donating(inputs, &[])
    }

    /// As `execute`, donating the inputs at `donated` (indices): an output the module aliases
    /// to one (`tf.aliasing_output`) may take its memory instead of new memory. A donated
    /// buffer is consumed: any later use of it is an error PJRT reports ("deleted or
    /// donated"), so donate only buffers nothing else holds.
    pub fn execute_donating(&self, inputs: &[&Buffer], donated: &[usize]) -> Result<Vec<Buffer>> {
        self.client.check_process()?;
        self.check_inputs(inputs)?;
        self.check_output_memory()?;
        let api = self.client.plugin.api();
        // On the stack for a few inputs (an eager op's launch allocates per input otherwise).
        let mut args: SmallVec<[*mut ffi::PJRT_Buffer; 8]> = SmallVec::new();
        let mut kept: SmallVec<[i64; 8]> = SmallVec::new();
        for (i, b) in inputs.iter().enumerate() {
            args.push(b.raw());
            if self.may_alias && !donated.contains(&i) {
                kept.push(i as i64);
            }
        }
        let arg_lists: [*const *mut ffi::PJRT_Buffer; 1] = [args.as_ptr()];
        let mut outs: SmallVec<[*mut ffi::PJRT_Buffer; 4]> =
            smallvec::smallvec![std::ptr::null_mut(); self.num_outputs];
        let out_lists: [*mut *mut ffi::PJRT_Buffer; 1] = [outs.as_mut_ptr()];
        let mut opts: ffi::PJRT_ExecuteOptions = ffi::args();
        if !kept.is_empty() {
            opts.non_donatable_input_indices = kept.as_ptr();
            opts.num_non_donatable_input_indices = kept.len();
        }
        let mut a: ffi::PJRT_LoadedExecutable_Execute_Args = ffi::args();
        a.executable = self.raw;
        a.options = &mut opts;
        a.argument_lists = arg_lists.as_ptr();
        a.num_devices = 1;
        a.num_args = args.len();
        a.output_lists = out_lists.as_ptr();
        pjrt!(api, PJRT_LoadedExecutable_Execute, &mut a)?;
        if let (Some(true), Some(sig)) = (self.typed_outputs.get(), &self.signature) {
            let typed = outs.iter().zip(&sig.outputs);
            return Ok(typed
                .map(|(&raw, t)| {
                    Buffer::from_raw(self.client.clone(), raw, t.dtype, t.shape.clone())
                })
                .collect());
        }
        let bufs = outs
            .into_iter()
            .map(|raw| Buffer::from_output(self.client.clone(), raw))
            .collect::<Result<Vec<_>>>()?;
        self.typed_outputs.get_or_init(|| {
            self.signature.as_ref().is_some_and(|sig| {
                sig.outputs.len() == bufs.len()
                    && sig.outputs.iter().zip(&bufs).all(|(t, b)| is_type_of(t, b))
            })
        });
        Ok(bufs)
    }

    /// Executes and waits for every output (Debug mode's launch-blocking behaviour).
    pub fn execute_blocking(&self, inputs: &[&Buffer]) -> Result<Vec<Buffer>> {
        let outs = self.execute(inputs)?;
        for o in &outs {
            o.block_until_ready()?;
        }
        Ok(outs)
    }
}

impl Drop for Executable {
    fn drop(&mut self) {
        if self.client.plugin.forked() {
            return; // leaked in a forked child: PJRT cannot run there
        }
        let mut a: ffi::PJRT_LoadedExecutable_Destroy_Args = ffi::args();
        a.executable = self.raw;
        if let Err(e) = pjrt!(
            self.client.plugin.api(),
            PJRT_LoadedExecutable_Destroy,
            &mut a
        ) {
            tracing::warn!("destroying executable: {e}");
        }
    }
}

/// The options a compile on `platform` gets: the caller's, plus the platform's defaults.
///
/// On `cpu`, XNNPACK is off (`xla_cpu_use_xnnpack=false`): the XLA CPU plugin's XNNPACK dots
/// keep weights packed from an earlier execution and reuse them when a later execution's
/// weight buffer lands at the same address, so a cached executable silently computed with a
/// previous call's weights (measured: an `addmm` [32,1536]x[1536,384] run through one
/// executable with new weights each time gave `b + x @ w_previous` in 9-99% of 200 calls;
/// a freshly compiled executable, or this option, never did; tests/stale_weights_tests.rs).
fn platform_options(platform: &str, options: &CompileOptions) -> CompileOptions {
    match platform {
        "cpu" => options.with_default_override("xla_cpu_use_xnnpack", OptionOverride::Bool(false)),
        _ => options.clone(),
    }
}

/// Whether buffer `b` is of type `t` (dtype and shape).
fn is_type_of(t: &TensorType, b: &Buffer) -> bool {
    t.dtype == b.dtype() && t.shape == b.shape()
}

/// Whether `module` may alias an output to an input: any of the attributes that declare it
/// (`tf.aliasing_output`, `jax.buffer_donor`, `mhlo.input_output_alias`) appears in its text.
/// Without one no input can be donated, so a launch need not say which it keeps.
fn may_alias(module: &str) -> bool {
    ["aliasing_output", "buffer_donor", "input_output_alias"]
        .iter()
        .any(|a| module.contains(a))
}

/// `sym_name` of the module if it has one (`module @add {`), else "main".
fn main_name(module: &str) -> String {
    module
        .trim_start()
        .strip_prefix("module @")
        .and_then(|r| {
            r.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
                .next()
        })
        .filter(|s| !s.is_empty())
        .unwrap_or("main")
        .to_string()
}
