//! `tessera tune KERNEL`: tune a shipped kernel's block sizes on the default device, show
//! the best configs, plot time per evaluated config, cache the winner.

use super::kernels::FormArg;
use super::CliError;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Duration;
use tessera_lowering::DType;
use tessera_runtime::autotune::{
    tune, AutotuneMode, Outcome, Strategy, TunableKernel, TuneOptions, TuneReport,
};
use tessera_runtime::{plugin_store, Device};

#[derive(Args)]
pub struct TuneArgs {
    /// The kernel to tune (`tessera kernels` lists them).
    pub kernel: String,
    /// The problem shape, comma separated (matmul: m,n,k); default: the kernel's default shape.
    #[arg(long)]
    pub shape: Option<String>,
    /// Element type of the inputs.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Search strategy: exhaustive, random or pattern.
    #[arg(long, default_value = "pattern")]
    pub strategy: String,
    /// Most configs to measure (the default config included).
    #[arg(long)]
    pub budget: Option<usize>,
    /// Most seconds to search.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Seed of the random strategy.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Tune again even if a result is cached (and replace it).
    #[arg(long)]
    pub retune: bool,
    /// StableHLO form the candidates are compiled in: `auto` times what a launch runs;
    /// `grid-loop` keeps one step per grid point (the structure a TPU runs), so block sizes
    /// matter on the CPU plugin too, where `auto` folds many configs into one program.
    #[arg(long, value_enum, default_value = "auto")]
    pub form: FormArg,
    /// Configs shown in the table.
    #[arg(long, default_value_t = 5)]
    pub top: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &TuneArgs) -> Result<(), CliError> {
    let usage = |e: String| CliError::Usage(e);
    let dtype: DType = args
        .dtype
        .parse()
        .map_err(|e: tessera_lowering::dtype::UnknownDType| usage(e.to_string()))?;
    let shipped = super::kernels::shipped(&args.kernel)?;
    let shape = match &args.shape {
        None => shipped.default_shape.to_vec(),
        Some(s) => parse_shape(s)?,
    };
    super::kernels::preflight(shipped, dtype, &shape)?;
    let kernel =
        crate::tuning::for_kernel(&args.kernel, &shape, dtype).map_err(|e| usage(e.to_string()))?;
    let strategy = match args.strategy.parse().map_err(usage)? {
        Strategy::Random { .. } => Strategy::Random { seed: args.seed },
        s => s,
    };
    let max_time = match args.seconds {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            return Err(usage(format!("--seconds {s}: expected a positive number")))
        }
        s => s.map(Duration::from_secs_f64),
    };
    // The command's purpose is tuning: always `Full` (TESSERA_AUTOTUNE governs library use).
    let options = TuneOptions {
        strategy,
        max_evals: args.budget,
        max_time,
        mode: AutotuneMode::Full,
        retune: args.retune,
        form: args.form.into(),
        ..TuneOptions::new(plugin_store::cache_dir())
    };
    let device = Device::from_env()?;

    let planned = args
        .budget
        .unwrap_or(usize::MAX)
        .min(kernel.space().feasible().len());
    let bar = ProgressBar::new(planned as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} tuning [{bar:30}] {pos} measured, {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let report = tune(&kernel, &device, &options, &mut |p| {
        bar.set_position(p.evaluated as u64);
        bar.set_message(format!(
            "{}: {}",
            p.evaluation.config,
            describe(&p.evaluation.outcome)
        ));
    });
    bar.finish_and_clear();
    let report = report.map_err(|e| usage(e.to_string()))?;

    let plot = report.cache_path.as_ref().map(|p| p.with_extension("svg"));
    let plotted = plot
        .as_ref()
        .map(|p| super::tune_plot::plot_history(&report, p));
    if args.json {
        println!("{}", json(&report));
    } else {
        print_table(&report, args.top);
    }
    match (plot, plotted) {
        (Some(path), Some(Ok(()))) => eprintln!("plot: {}", path.display()),
        (_, Some(Err(e))) => eprintln!("no plot: {e}"),
        _ => {}
    }
    if let Some(why) = &report.cache_write_error {
        eprintln!("warning: the result was not cached ({why}); the next run tunes again");
    }
    Ok(())
}

fn parse_shape(s: &str) -> Result<Vec<usize>, CliError> {
    s.split([',', 'x'])
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .map_err(|_| CliError::Usage(format!("--shape `{s}`: `{d}` is not a dimension")))
        })
        .collect()
}

fn ms(t: Option<Duration>) -> Option<f64> {
    t.map(|t| t.as_secs_f64() * 1e3)
}

fn describe(o: &Outcome) -> String {
    match o {
        Outcome::Measured(t) => format!("{:.3} ms", t.as_secs_f64() * 1e3),
        Outcome::Failed(why) => format!("failed: {why}"),
        Outcome::Rejected(why) => format!("rejected: {why}"),
    }
}

fn json(r: &TuneReport) -> serde_json::Value {
    serde_json::json!({
        "kernel": r.kernel,
        "default_ms": ms(r.default_time),
        "best_ms": ms(r.best_time),
        "speedup": r.speedup(),
        "evaluated": r.evaluated,
        "space_size": r.space_size,
        "best_config": r.config.to_string(),
        "cache_hit": r.cache_hit(),
    })
}

fn print_table(r: &TuneReport, top: usize) {
    let default_ms = ms(r.default_time);
    let ranked = r.ranked();
    // Speedups against the default's score from the same search, not its confirmed time.
    let default_score = ranked
        .iter()
        .find(|(c, _)| **c == r.default_config)
        .map(|(_, t)| t.as_secs_f64() * 1e3);
    println!(
        "{:>4}  {:<28} {:>10} {:>10}",
        "rank", "config", "ms", "speedup"
    );
    for (i, (config, t)) in ranked.into_iter().take(top).enumerate() {
        let t = t.as_secs_f64() * 1e3;
        let speedup = default_score.map_or(String::from("-"), |d| format!("{:.2}x", d / t));
        let mark = if *config == r.default_config {
            " (default)"
        } else {
            ""
        };
        println!(
            "{:>4}  {:<28} {:>10.3} {:>10}{mark}",
            i + 1,
            config.to_string(),
            t,
            speedup
        );
    }
    let failed = r
        .history
        .iter()
        .filter(|e| matches!(e.outcome, Outcome::Failed(_)))
        .count();
    let rejected: Vec<_> = r
        .history
        .iter()
        .filter(|e| matches!(e.outcome, Outcome::Rejected(_)))
        .collect();
    println!(
        "{}: best {} ({}), default {} ({}) timed side by side, {} of {} feasible configs measured this run ({} skipped by constraints, {failed} failed, {} wrong output){}",
        r.kernel,
        r.config,
        ms(r.best_time).map_or("-".into(), |v| format!("{v:.3} ms")),
        r.default_config,
        default_ms.map_or("-".into(), |v| format!("{v:.3} ms")),
        r.evaluated,
        r.space_size,
        r.skipped.len(),
        rejected.len(),
        if r.cache_hit() { format!(", cached result ({:.2} ms to look up)", r.elapsed.as_secs_f64() * 1e3) } else { String::new() },
    );
    for e in rejected {
        println!("  rejected {}: {}", e.config, describe(&e.outcome));
    }
    match (&r.cache_path, &r.cache_write_error) {
        (Some(p), None) => println!("cache: {}", p.display()),
        (Some(p), Some(_)) => println!("cache: {} (not written)", p.display()),
        _ => {}
    }
}
