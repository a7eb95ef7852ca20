//! The `tessera` CLI (clap). Each subcommand lives in its own module.

mod aot;
mod bench;
mod demo;
mod devices;
mod files;
mod inputs;
mod kernels;
mod ops;
mod plugin;
mod run_mlir;
mod tune;
mod tune_plot;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "Kernel-authoring DSL and JIT for TPUs"
)]
struct Cli {
    /// Print executable-cache statistics (hits, misses, evictions, compile time) at exit.
    #[arg(long, global = true)]
    stats: bool,
    /// Show the PJRT plugins' own log lines (quiet by default unless TF_CPP_MIN_LOG_LEVEL is set).
    #[arg(long, short, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the devices of every installed plugin: kind, plugin path, PJRT API version, device count.
    Devices,
    /// Install or list PJRT plugins.
    Plugin {
        #[command(subcommand)]
        action: plugin::PluginAction,
    },
    /// Compile a StableHLO file and run it, printing its outputs.
    RunMlir(run_mlir::RunMlirArgs),
    /// The main job: run the shipped kernels and sample programs on the default device, print
    /// their error vs float64 references and their timings.
    Demo,
    /// List the registered kernels, one per line, name first.
    Kernels,
    /// Print a kernel lowered for a problem shape (StableHLO).
    Lower(kernels::LowerArgs),
    /// Compile kernels for TPU generations through libtpu without a TPU (JSON Lines with --json).
    Aot(aot::AotArgs),
    /// Tune a kernel's block sizes on the default device; cache and plot the result.
    Tune(tune::TuneArgs),
    /// The ATen op library: coverage of the op table by lowerings and the last sweep.
    Ops {
        #[command(subcommand)]
        action: ops::OpsAction,
    },
    /// Benchmarks (`bench eager`: the eager modes side by side).
    Bench {
        #[command(subcommand)]
        action: bench::BenchAction,
    },
    /// Run a kernel on random inputs, compare to its float64 reference, print the max error
    /// (exit code 1 on mismatch).
    Check(kernels::CheckArgs),
}

/// Plugins log through absl to stderr (`I0000 ... cpu_device_count set ...`): quiet unless
/// the user asked (`--verbose`) or chose a level. Set before any plugin loads, while the
/// process has one thread.
fn set_plugin_log_level(verbose: bool) {
    if std::env::var_os("TF_CPP_MIN_LOG_LEVEL").is_none() {
        std::env::set_var("TF_CPP_MIN_LOG_LEVEL", if verbose { "0" } else { "3" });
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    set_plugin_log_level(cli.verbose);
    let result = match cli.command {
        Command::Devices => devices::run(),
        Command::Plugin { action } => plugin::run(action),
        Command::RunMlir(args) => run_mlir::run(&args),
        Command::Demo => demo::run(),
        Command::Kernels => kernels::list(),
        Command::Lower(args) => kernels::lower(&args),
        Command::Check(args) => kernels::check(&args),
        Command::Aot(args) => aot::run(&args),
        Command::Tune(args) => tune::run(&args),
        Command::Ops { action } => ops::run(action),
        Command::Bench { action } => bench::run(action),
    };
    if cli.stats {
        print_stats();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Errors of the CLI: the runtime's, or bad arguments.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Runtime(#[from] tessera_runtime::RuntimeError),
    #[error("{0}")]
    Usage(String),
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

fn print_stats() {
    let eager = tessera_eager::stats();
    if eager != Default::default() {
        eprint!("{eager}");
    }
    if let Ok(d) = tessera_runtime::Device::from_env() {
        if let Ok(c) = d.client() {
            let s = c.cache_stats();
            eprintln!(
                "executable cache: {} hit(s), {} miss(es), {} entr(ies) of {}, {} eviction(s), {:.1} ms compiling",
                s.hits,
                s.misses,
                s.entries,
                s.capacity,
                s.evictions,
                s.compile_time.as_secs_f64() * 1e3
            );
        }
    }
}
