//! `tessera aot [KERNEL|--all] --topology T [--json]`: compile kernels for TPU generations
//! through libtpu, with no TPU attached. One JSON object per line (JSON Lines) per kernel and
//! topology: {"kernel", "topology", "ok", "compile_ms", "code_bytes", "error"}.

use super::kernels::{shipped, trace, Problem};
use super::CliError;
use clap::Args;
use serde_json::json;
use tessera_runtime::TpuTarget;

#[derive(Args)]
pub struct AotArgs {
    /// A shipped kernel (or --all).
    pub kernel: Option<String>,
    /// Every shipped kernel.
    #[arg(long, conflicts_with = "kernel")]
    pub all: bool,
    /// Topologies to compile for, e.g. v5e:2x2, v6e:2x2, tpu7x:2x2x1 (repeatable).
    #[arg(long, required = true)]
    pub topology: Vec<String>,
    #[command(flatten)]
    pub problem: Problem,
    /// JSON Lines instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &AotArgs) -> Result<(), CliError> {
    let kernels = match (&args.kernel, args.all) {
        (Some(name), false) => vec![shipped(name)?],
        (None, true) => tessera_kernels::shipped().iter().collect(),
        _ => return Err(CliError::Usage("name a kernel or pass --all".into())),
    };
    // libtpu aborts on some malformed topologies: check them all before any output.
    for topology in &args.topology {
        tessera_runtime::validate_topology(topology)?;
    }
    if !args.json {
        println!(
            "{:<12} {:<12} {:<4} {:>11} {:>11}  error",
            "kernel", "topology", "ok", "compile ms", "code bytes"
        );
    }
    let mut failures = 0;
    for topology in &args.topology {
        // A bad topology or a missing libtpu fails every kernel alike: report it once, plainly.
        let target = TpuTarget::aot(topology)?;
        for k in &kernels {
            let result = trace(k, &args.problem).and_then(|p| Ok(target.compile_program(&p)?));
            let (ok, ms, bytes, error) = match &result {
                Ok(c) => (true, c.compile_time.as_secs_f64() * 1e3, c.code_bytes, None),
                Err(e) => (false, 0.0, 0, Some(e.to_string())),
            };
            failures += usize::from(!ok);
            if args.json {
                let line = json!({"kernel": k.name, "topology": topology, "ok": ok, "compile_ms": (ms * 10.0).round() / 10.0, "code_bytes": bytes, "error": error});
                println!("{line}");
            } else {
                println!(
                    "{:<12} {:<12} {:<4} {:>11.1} {:>11}  {}",
                    k.name,
                    topology,
                    if ok { "yes" } else { "no" },
                    ms,
                    bytes,
                    error.unwrap_or_default()
                );
            }
        }
    }
    if failures == 0 {
        Ok(())
    } else {
        Err(CliError::Usage(format!("{failures} compile(s) failed")))
    }
}
