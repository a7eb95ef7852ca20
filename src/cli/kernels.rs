//! `tessera kernels`, `tessera lower KERNEL`, `tessera check KERNEL`.

use super::CliError;
use clap::{Args, ValueEnum};
use tessera_kernels::ShippedKernel;
use tessera_lowering::backend::{self, Backend, Lowered};
use tessera_lowering::kernel::registered_kernels;
use tessera_lowering::mosaic::TpuGeneration;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::DType;
use tessera_runtime::{Device, DeviceKind, RuntimeError};

/// `tessera kernels`: every registered kernel, name first, then where it is defined and, for
/// shipped kernels, what it computes.
pub fn list() -> Result<(), CliError> {
    for k in registered_kernels() {
        let info = k.info();
        let params: Vec<&str> = info.params.iter().map(|p| p.name).collect();
        let about = tessera_kernels::find(info.name)
            .map(|s| s.about)
            .unwrap_or("");
        println!(
            "{:<12} {}:{}  ({})  {}",
            info.name,
            info.file,
            info.line,
            params.join(", "),
            about
        );
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Target {
    Stablehlo,
    Mosaic,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FormArg {
    Auto,
    GridLoop,
    Batched,
}

impl From<FormArg> for Form {
    fn from(f: FormArg) -> Form {
        match f {
            FormArg::Auto => Form::Auto,
            FormArg::GridLoop => Form::GridLoop,
            FormArg::Batched => Form::Batched,
        }
    }
}

/// The problem a kernel is run on: shape and dtype.
#[derive(Args)]
pub struct Problem {
    /// The kernel's problem shape, comma separated (e.g. `256,256,256` for matmul's m,n,k);
    /// default: the kernel's default shape.
    #[arg(long)]
    pub shape: Option<String>,
    /// Element type of the inputs.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
}

impl Problem {
    fn resolve(&self, k: &ShippedKernel) -> Result<(Vec<usize>, DType), CliError> {
        let dtype: DType = self
            .dtype
            .parse()
            .map_err(|e: tessera_lowering::dtype::UnknownDType| CliError::Usage(e.to_string()))?;
        let shape = match &self.shape {
            None => k.default_shape.to_vec(),
            Some(s) => s
                .split([',', 'x'])
                .map(|d| {
                    d.trim().parse::<usize>().map_err(|_| {
                        CliError::Usage(format!("--shape `{s}`: `{d}` is not a dimension"))
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        if shape.len() != k.problem_dims.len() {
            return Err(CliError::Usage(format!(
                "kernel `{}` takes a problem shape of {} dims ({}), got {}",
                k.name,
                k.problem_dims.len(),
                k.problem_dims.join(","),
                shape.len()
            )));
        }
        Ok((shape, dtype))
    }
}

pub fn shipped(name: &str) -> Result<&'static ShippedKernel, CliError> {
    tessera_kernels::find(name).ok_or_else(|| {
        let names: Vec<&str> = tessera_kernels::shipped().iter().map(|k| k.name).collect();
        CliError::Usage(format!(
            "no kernel named `{name}` (shipped: {})",
            names.join(", ")
        ))
    })
}

#[derive(Args)]
pub struct LowerArgs {
    pub kernel: String,
    #[arg(long, value_enum, default_value = "stablehlo")]
    pub target: Target,
    #[command(flatten)]
    pub problem: Problem,
    /// StableHLO form: the batched (loop-free) form where legal, or the grid loop.
    #[arg(long, value_enum, default_value = "auto")]
    pub form: FormArg,
    /// Mosaic: print the body as sent to the TPU compiler (`stable_mosaic` serialized form)
    /// instead of the readable form.
    #[arg(long)]
    pub serialized: bool,
    /// Mosaic: the TPU generation whose rules (VMEM budget) apply.
    #[arg(long, default_value = "v6e")]
    pub generation: String,
}

/// Traces a shipped kernel for a problem.
pub fn trace(k: &ShippedKernel, problem: &Problem) -> Result<KernelProgram, CliError> {
    let (shape, dtype) = problem.resolve(k)?;
    let launch = (k.launch)(&shape).map_err(CliError::Usage)?;
    let inputs: Vec<(DType, Vec<usize>)> = (k.input_shapes)(&shape)
        .into_iter()
        .map(|s| (dtype, s))
        .collect();
    Ok(launch.trace_program(&inputs).map_err(RuntimeError::from)?)
}

pub fn lower(args: &LowerArgs) -> Result<(), CliError> {
    let program = trace(shipped(&args.kernel)?, &args.problem)?;
    let target = match args.target {
        Target::Stablehlo => backend::Target::StableHlo,
        Target::Mosaic => backend::Target::Tpu(
            TpuGeneration::from_topology(&args.generation).map_err(RuntimeError::from)?,
        ),
    };
    let backend = Backend::for_target(target, args.form.into(), false);
    match backend::lower(&program, backend).map_err(RuntimeError::from)? {
        // The Mosaic kernel itself, not the `tpu_custom_call` module around it.
        Lowered::Mosaic { kernel, .. } if args.serialized => println!("{}", kernel.serialized),
        Lowered::Mosaic { kernel, .. } => println!("{}", kernel.readable),
        lowered => println!("{}", lowered.into_module().map_err(RuntimeError::from)?),
    }
    Ok(())
}

#[derive(Args)]
pub struct CheckArgs {
    pub kernel: String,
    /// cpu (StableHLO on the XLA CPU plugin) or interp (the reference interpreter).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    #[command(flatten)]
    pub problem: Problem,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// `check` and `tune` make a problem's inputs, their f64 copies and the float64 reference
/// on the host: a problem whose inputs the host cannot hold is refused before any of it is
/// allocated (the allocation would abort the process). The probe reserves and frees without
/// touching the memory.
pub fn preflight(k: &ShippedKernel, dtype: DType, shape: &[usize]) -> Result<(), CliError> {
    (k.launch)(shape).map_err(CliError::Usage)?;
    // An f64 value, its rounded copy and the tensor itself, per input element.
    let per_element = 16 + dtype.size_bytes();
    let mut need = 0usize;
    for s in (k.input_shapes)(shape) {
        let n = tessera_lowering::host::element_count(dtype, &s).map_err(RuntimeError::from)?;
        need = n
            .checked_mul(per_element)
            .and_then(|b| b.checked_add(need))
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "kernel `{}` on {shape:?} {dtype}: its inputs overflow the address space",
                    k.name
                ))
            })?;
    }
    let mut probe: Vec<u8> = Vec::new();
    probe.try_reserve_exact(need).map_err(|_| {
        CliError::Usage(format!(
            "kernel `{}` on {shape:?} {dtype}: its inputs and float64 references need {need} bytes on the host, more than it can allocate",
            k.name
        ))
    })
}

pub fn check(args: &CheckArgs) -> Result<(), CliError> {
    let k = shipped(&args.kernel)?;
    let (shape, dtype) = args.problem.resolve(k)?;
    preflight(k, dtype, &shape)?;
    let device = Device::new(DeviceKind::parse(&args.device)?)?;
    let report = tessera_kernels::check(k, &device, dtype, &shape, args.seed)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    println!(
        "{} {} {:?} on {}: max rel err {:.3e} (tolerance {:.0e}) in {:.2} ms: {}",
        k.name,
        dtype,
        shape,
        device.kind(),
        report.max_rel_err,
        report.tolerance,
        report.elapsed.as_secs_f64() * 1e3,
        if report.passed { "ok" } else { "MISMATCH" }
    );
    if report.passed {
        Ok(())
    } else {
        Err(CliError::Usage(format!(
            "{} does not match its float64 reference",
            k.name
        )))
    }
}
